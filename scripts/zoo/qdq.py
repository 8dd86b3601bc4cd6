#!/usr/bin/python3
"""qdq.py: a static post-training quantizer that writes the QDQ form onnxruntime.quantization.quantize_static
writes (QuantFormat.QDQ, per_channel=True, reduce_range=False, weight_type QInt8, MinMax calibration),
without onnxruntime's Python package (not installable here).

usage: qdq.py MODEL.onnx OUT.onnx [--activations u8|s8] [--calib N] [--size S]

  --activations u8   activation_type QUInt8, asymmetric (ORT's default)
  --activations s8   activation_type QInt8 with extra_options ActivationSymmetric=True
  --calib N          calibration inputs (seeded, common.CALIB_SEED; default 16)

The rules, and the onnxruntime source each one comes from, are in docs/guide/model-zoo.md; the
function names below follow onnxruntime/python/tools/quantization/ (quant_utils.py, base_quantizer.py,
qdq_quantizer.py, operators/*.py) so that each step can be compared with its original.

Calibration runs the float model in ONNX Runtime (node, graph optimisation disabled, as ORT's
calibrator does) with every tensor to calibrate as an extra output; scripts/onnx/ort_run.js --minmax
keeps each output's min and max over the calibration inputs.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import common  # noqa: E402
from common import UsageError  # noqa: E402

# op_types_to_quantize when none are given: the union of QLinearOpsRegistry (with CommonOpsRegistry)
# and QDQRegistry (operators registry.py); quantize_static passes the same list to the calibrator.
QLINEAR_OPS = {"ArgMax", "Conv", "Gemm", "MatMul", "Add", "Mul", "Relu", "Clip", "LeakyRelu", "Sigmoid", "MaxPool",
               "GlobalAveragePool", "Split", "Pad", "Reshape", "Squeeze", "Unsqueeze", "Resize", "AveragePool",
               "Concat", "Softmax", "Where", "Gather", "Transpose", "EmbedLayerNormalization"}
QDQ_OPS = {"Conv", "ConvTranspose", "Gemm", "Clip", "Relu", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
           "Resize", "MaxPool", "AveragePool", "Slice", "Pad", "MatMul", "Split", "Gather", "GatherElements",
           "Where", "InstanceNormalization", "LayerNormalization", "BatchNormalization"}
OPS = QLINEAR_OPS | QDQ_OPS
# QDQDirect8BitOp (and QDQMaxPool, QDQResize at the opsets here): the output reuses the input's scale
# and zero point, and only when the input is quantized already.
DIRECT = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "AveragePool", "Slice", "MaxPool", "Resize", "TopK"}
FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16)

# quant_utils.py: ONNX_INT_TYPE_RANGE / ONNX_INT_TYPE_SYMMETRIC_RANGE
RANGE = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127)}
SYM_RANGE = {TensorProto.UINT8: (0, 254), TensorProto.INT8: (-127, 127)}
NP = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8}


def qmin_qmax(qtype, symmetric):
    """get_qmin_qmax_for_qType(qType, reduce_range=False, symmetric)."""
    lo, hi = (SYM_RANGE if symmetric else RANGE)[qtype]
    return np.array(lo, NP[qtype]), np.array(hi, NP[qtype])


def compute_scale_zp(rmin, rmax, qmin, qmax, symmetric):
    """quant_utils.compute_scale_zp (min_real_range None): rmin, rmax float32 0-d arrays.
    The range is widened to include 0; the subtraction is float32, the division float64, the scale
    rounded to float32 last; the zero point is numpy's round (half to even)."""
    rmin = np.minimum(rmin, np.array(0, dtype=rmin.dtype))
    rmax = np.maximum(rmax, np.array(0, dtype=rmax.dtype))
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, +absmax
    dr = np.array(rmax - rmin, dtype=np.float64)
    dq = np.array(qmax, dtype=np.float64) - np.array(qmin, dtype=np.float64)
    scale = np.array(dr / dq)
    if scale < np.finfo(rmax.dtype).tiny:
        return np.array(0, dtype=qmin.dtype), np.array(1.0, dtype=rmax.dtype)
    if symmetric:
        zp = np.array(np.round((qmin + qmax) / np.array(2.0, dtype=np.float64)), dtype=qmin.dtype)
    else:
        zp = np.array(np.round(qmin - rmin / scale), dtype=qmin.dtype)
    return zp, scale.astype(rmax.dtype)


def quantize_nparray(qtype, arr, scale, zp):
    """quant_utils.quantize_nparray: float32 divide, round half to even, add zp, clip to the type."""
    lo, hi = RANGE[qtype]
    a = np.asarray((arr.astype(np.float32) / scale).round() + zp)
    np.clip(a, lo, hi, out=a)
    return a.astype(NP[qtype])


def quantize_data(data, qtype, symmetric):
    """quant_utils.quantize_data: min/max of the data, compute_scale_zp, quantize_nparray."""
    rmin = np.array(data.min() if data.size else 0.0, dtype=data.dtype)
    rmax = np.array(data.max() if data.size else 0.0, dtype=data.dtype)
    qmin, qmax = qmin_qmax(qtype, symmetric)
    zp, scale = compute_scale_zp(rmin, rmax, qmin, qmax, symmetric)
    return zp, scale, quantize_nparray(qtype, data, scale, zp)


# --- the model before quantization -------------------------------------------------------------

def per_use_copies(model):
    """Make every float parameter belong to one node input, as ORT's quantizer assumes:
    - Constant nodes become initializers (their values unchanged);
    - an Identity of an initializer (torch's export of a shared parameter) becomes a copy of the
      initializer named by the Identity's output;
    - a float initializer read by several node inputs (torch exports identical tensors, e.g. zero
      biases, as one) gets one copy per further use, NAME_use2, NAME_use3, ...
    Without this, ORT's QDQQuantizer quantizes a shared bias once, with the first consumer's
    input and weight scales (bias_to_quantize is keyed by name: "already been marked"), and a
    weight behind an Identity as an activation. Returns how many copies were made."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    outputs = {o.name for o in g.output}
    keep, copies = [], 0
    for n in g.node:
        if n.op_type == "Constant" and len(n.output) == 1 and n.output[0] not in outputs:
            attr = {a.name: a for a in n.attribute}
            if "value" in attr:
                t = onnx.TensorProto()
                t.CopyFrom(attr["value"].t)
                t.name = n.output[0]
                g.initializer.append(t)
                inits[t.name] = t
                continue
        if n.op_type == "Identity" and n.input[0] in inits and n.output[0] not in outputs:
            t = onnx.TensorProto()
            t.CopyFrom(inits[n.input[0]])
            t.name = n.output[0]
            g.initializer.append(t)
            inits[t.name] = t
            copies += 1
            continue
        keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    seen = {}
    for n in g.node:
        for k, name in enumerate(n.input):
            t = inits.get(name)
            if t is None or t.data_type not in FLOAT_TYPES:
                continue
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                c = onnx.TensorProto()
                c.CopyFrom(t)
                c.name = f"{name}_use{seen[name]}"
                g.initializer.append(c)
                n.input[k] = c.name
                copies += 1
    used = {i for n in g.node for i in n.input}
    live = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(live)
    return copies


def tensor_types(model):
    """Element type of every value (shape inference), graph inputs and outputs, initializers."""
    m = onnx.shape_inference.infer_shapes(model)
    types = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    for t in model.graph.initializer:
        types[t.name] = t.data_type
    return types, m


def tensors_to_calibrate(model, types):
    """calibrate.py select_tensors_to_calibrate: the float inputs and outputs of every node whose
    op type is quantized, initializers excepted."""
    inits = {t.name for t in model.graph.initializer}
    out = []
    for n in model.graph.node:
        if n.op_type in OPS:
            for name in list(n.input) + list(n.output):
                if name and name not in inits and types.get(name) in FLOAT_TYPES and name not in out:
                    out.append(name)
    return out


def calibrate(model, types, x):
    """MinMax over the calibration inputs x (one per row): {tensor: (min, max)} as float32
    (calibrate.py MinMaxCalibrater)."""
    names = tensors_to_calibrate(model, types)
    ranges = {}
    graph_inputs = {i.name for i in model.graph.input}
    for name in names:
        if name in graph_inputs:  # the data itself, no need to run anything
            ranges[name] = (np.float32(x.min()), np.float32(x.max()))
    aug = onnx.ModelProto()
    aug.CopyFrom(model)
    have = {o.name for o in aug.graph.output}
    want = [nm for nm in names if nm not in graph_inputs]
    for name in want:
        if name not in have:
            aug.graph.output.append(helper.make_tensor_value_info(name, types[name], None))
    with tempfile.TemporaryDirectory(prefix="tsr-calib-") as d:
        mp, xp, rp = os.path.join(d, "aug.onnx"), os.path.join(d, "x.npy"), os.path.join(d, "ranges.json")
        onnx.save(aug, mp)
        np.save(xp, x)
        common.ort_run(mp, xp, rp, batch=True, opt="disabled", as_is=True, minmax=True)
        import json
        with open(rp) as f:
            r = json.load(f)
    for name in want:
        lo, hi = r[name]
        ranges[name] = (np.float32(lo), np.float32(hi))
    return ranges


# --- the quantizer -----------------------------------------------------------------------------

class QDQQuantizer:
    """qdq_quantizer.py QDQQuantizer, for per_channel=True, reduce_range=False, weight QInt8,
    activation QUInt8 (symmetric False) or QInt8 (ActivationSymmetric True), no extra options."""

    def __init__(self, model, ranges, types, activations):
        self.model = model
        self.g = model.graph
        self.types = types
        self.act_type = TensorProto.UINT8 if activations == "u8" else TensorProto.INT8
        self.act_symmetric = activations == "s8"
        self.weight_type = TensorProto.INT8
        self.inits = {t.name: t for t in self.g.initializer}
        self.tensors_to_quantize = {}  # name -> dict(kind, axis, provider)
        self.bias_to_quantize = {}  # name -> (node name, input, weight, beta)
        self.nodes_to_remove = []
        self.quantized = {}  # name -> (q name, scale name, zp name) (quantized_value_map)
        self.new_inits = []
        self.new_nodes = []
        self.params = self.calc_graph_quant_params(ranges)

    # graph helpers (onnx_model.py ONNXModel)
    def consumers(self, name):
        return [n for n in self.g.node if name in n.input]

    def is_graph_output(self, name):
        return any(o.name == name for o in self.g.output)

    def is_graph_input(self, name):
        return any(i.name == name for i in self.g.input)

    def replace_output_of_all_nodes(self, old, new):
        for n in self.g.node:
            for k, o in enumerate(n.output):
                if o == old:
                    n.output[k] = new

    def replace_input_of_all_nodes(self, old, new):
        for n in self.g.node:
            for k, i in enumerate(n.input):
                if i == old:
                    n.input[k] = new

    # base_quantizer.py
    def adjust_tensor_ranges(self, ranges):
        """Clip/Relu: the input takes the output's range when the input has one consumer;
        Softmax's output is [0, 1]."""
        for n in self.g.node:
            if n.op_type in ("Clip", "Relu"):
                if len(self.consumers(n.input[0])) != 1:
                    continue
                if n.input[0] not in ranges or n.output[0] not in ranges:
                    continue
                ranges[n.input[0]] = ranges[n.output[0]]
            elif n.op_type == "Softmax":
                ranges[n.output[0]] = (np.float32(0.0), np.float32(1.0))

    def calc_graph_quant_params(self, ranges):
        ranges = dict(ranges)
        self.adjust_tensor_ranges(ranges)
        qmin, qmax = qmin_qmax(self.act_type, self.act_symmetric)
        return {name: compute_scale_zp(np.array(lo, np.float32), np.array(hi, np.float32), qmin, qmax,
                                       self.act_symmetric)
                for name, (lo, hi) in ranges.items()}

    def is_quantizable(self, name):
        return self.types.get(name) in FLOAT_TYPES

    def is_tensor_quantized(self, name):
        return name in self.tensors_to_quantize or name in self.bias_to_quantize

    # marking (qdq_quantizer.py __quantize_tensor and friends)
    def quantize_activation_tensor(self, name, provider=None):
        if not name or not self.is_quantizable(name):
            return
        if provider is not None:
            self.tensors_to_quantize[name] = {"kind": "act", "axis": None, "provider": provider}
        elif name not in self.tensors_to_quantize:
            self.tensors_to_quantize[name] = {"kind": "act", "axis": None, "provider": None}

    def quantize_weight_tensor_per_channel(self, name, axis):
        t = self.inits.get(name)
        if t is not None and t.data_type in FLOAT_TYPES:
            axis = axis + len(t.dims) if axis < 0 else axis
            self.tensors_to_quantize[name] = {"kind": "weight", "axis": axis, "provider": None}

    def quantize_weight_tensor(self, name):
        if name and self.is_quantizable(name) and name not in self.tensors_to_quantize:
            self.tensors_to_quantize[name] = {"kind": "weight", "axis": None, "provider": None}

    def quantize_bias_tensor(self, node, bias, inp, weight, beta=1.0):
        t = self.inits.get(bias)
        if t is not None and t.data_type in FLOAT_TYPES and bias not in self.bias_to_quantize:
            self.bias_to_quantize[bias] = (node.name, inp, weight, beta)

    def try_replacing_upstream_output(self, upstream, output):
        if (output in self.params and len(self.consumers(upstream)) == 1
                and not self.is_graph_output(upstream) and not self.is_graph_input(upstream)):
            self.replace_output_of_all_nodes(upstream, output)
            self.tensors_to_quantize.pop(upstream, None)
            return True
        return False

    # operators/*.py, one branch per class
    def quantize_node(self, n):
        op = n.op_type
        if op in ("Conv", "ConvTranspose"):  # conv.py QDQConv
            self.quantize_activation_tensor(n.input[0])
            self.quantize_activation_tensor(n.output[0])
            self.weight(n.input[1], 0 if op == "Conv" else 1)
            if len(n.input) == 3 and n.input[2]:
                self.quantize_bias_tensor(n, n.input[2], n.input[0], n.input[1])
        elif op == "Gemm":  # gemm.py QDQGemm
            self.quantize_activation_tensor(n.input[0])
            self.quantize_activation_tensor(n.output[0])
            trans_b = any(a.name == "transB" and a.i for a in n.attribute)
            self.weight(n.input[1], 0 if trans_b else 1)
            if len(n.input) == 3 and n.input[2] in self.inits:
                beta = next((a.f for a in n.attribute if a.name == "beta"), 1.0)
                self.quantize_bias_tensor(n, n.input[2], n.input[0], n.input[1], beta)
                for a in n.attribute:  # set_default_beta
                    if a.name == "beta":
                        a.f = 1.0
        elif op == "MatMul":  # matmul.py QDQMatMul: initializers per channel on axis 1
            for name in list(n.input) + list(n.output):
                if name in self.inits:
                    self.weight(name, 1)
                else:
                    self.quantize_activation_tensor(name)
        elif op in ("Relu", "Clip"):  # activation.py QDQRemovableActivation
            if not self.is_tensor_quantized(n.input[0]):
                return
            if not self.act_symmetric and self.try_replacing_upstream_output(n.input[0], n.output[0]):
                self.nodes_to_remove.append(n)
            else:
                self.quantize_activation_tensor(n.input[0])
            self.quantize_activation_tensor(n.output[0])
        elif op in DIRECT:  # direct_q8.py QDQDirect8BitOp (maxpool.py, resize.py at opset >= 12)
            if self.is_tensor_quantized(n.input[0]):
                self.quantize_activation_tensor(n.output[0], provider=n.input[0])
        elif op == "Split":  # split.py QDQSplit
            if not self.is_tensor_quantized(n.input[0]):
                self.quantize_activation_tensor(n.input[0])
            for o in n.output:
                self.quantize_activation_tensor(o, provider=n.input[0])
        elif op in ("Gather", "GatherElements"):  # gather.py QDQGather
            t = self.inits.get(n.input[0])
            if t is not None and t.data_type in FLOAT_TYPES:
                self.quantize_activation_tensor(n.input[0])
                self.quantize_activation_tensor(n.output[0], provider=n.input[0])
            elif self.is_tensor_quantized(n.input[0]):
                self.quantize_activation_tensor(n.output[0], provider=n.input[0])
        elif op == "Pad":  # pad.py QDQPad
            for name in n.input:
                self.quantize_activation_tensor(name)
            mode = next((a.s for a in n.attribute if a.name == "mode"), b"constant")
            value = None
            if len(n.input) > 2 and n.input[2] in self.inits:
                value = numpy_helper.to_array(self.inits[n.input[2]])
            same = mode in (b"reflect", b"edge", b"wrap") or value is None or float(value.reshape(-1)[0]) == 0.0
            self.quantize_activation_tensor(n.output[0], provider=n.input[0] if same else None)
        elif op == "Where":  # where.py QDQWhere
            if self.is_tensor_quantized(n.input[1]) and self.is_tensor_quantized(n.input[2]):
                for o in n.output:
                    self.quantize_activation_tensor(o)
        elif op in ("InstanceNormalization", "LayerNormalization", "BatchNormalization"):  # norm.py
            self.quantize_activation_tensor(n.input[0])
            scale = self.inits.get(n.input[1])
            if scale is not None:
                # axis 1 for Instance/LayerNormalization; a BatchNormalization scale is 1-D: axis 0
                self.weight(n.input[1], 0 if len(scale.dims) == 1 else 1)
            else:
                self.quantize_activation_tensor(n.input[1])
            self.quantize_bias_tensor(n, n.input[2], n.input[0], n.input[1])
            self.quantize_activation_tensor(n.output[0])
        else:  # qdq_base_operator.py QDQOperatorBase: every input and output
            for name in list(n.input) + list(n.output):
                self.quantize_activation_tensor(name)

    def weight(self, name, axis):
        """is_tensor_per_channel (per_channel=True): initializers per channel, others per tensor."""
        if name in self.inits:
            self.quantize_weight_tensor_per_channel(name, axis)
        else:
            self.quantize_weight_tensor(name)

    # writing (qdq_quantizer.py _quantize_normal_tensors, _quantize_sharing_param_tensors, _quantize_bias_tensors)
    def add_init(self, t):
        self.new_inits.append(t)
        self.inits[t.name] = t

    def add_qdq_pair_for_initializer(self, name, info):
        w = numpy_helper.to_array(self.inits[name])
        if info["axis"] is not None:
            axis, qtype = info["axis"], self.weight_type  # (a UINT8 type would be forced to INT8)
            zps, scales, qs = [], [], []
            dims = list(w.shape)
            dims[axis] = 1
            for c in range(w.shape[axis]):
                zp, scale, q = quantize_data(w.take(c, axis).flatten(), qtype, True)
                zps.append(zp)
                scales.append(scale)
                qs.append(np.asarray(q).reshape(dims))
            q = np.concatenate(qs, axis).astype(NP[qtype]).reshape(w.shape)
            shape = [w.shape[axis]]
            scale_t = helper.make_tensor(name + "_scale", self.inits[name].data_type, shape,
                                         np.hstack(scales).tolist())
            zp_t = helper.make_tensor(name + "_zero_point", qtype, shape, np.hstack(zps).tolist())
        else:
            qtype = self.weight_type if info["kind"] == "weight" else self.act_type
            symmetric = True if qtype == self.weight_type else self.act_symmetric  # is_weight_symmetric(INT8)
            zp, scale, q = quantize_data(w.flatten(), qtype, symmetric)
            q = np.asarray(q, dtype=NP[qtype]).reshape(w.shape)
            scale_t = helper.make_tensor(name + "_scale", self.inits[name].data_type, [], scale.reshape(-1).tolist())
            zp_t = helper.make_tensor(name + "_zero_point", qtype, [], zp.reshape(-1).tolist())
            axis = None
        self.add_init(scale_t)
        self.add_init(zp_t)
        self.add_init(numpy_helper.from_array(q, name + "_quantized"))
        out = name + "_DequantizeLinear_Output"
        self.replace_input_of_all_nodes(name, out)
        self.new_nodes.append(helper.make_node("DequantizeLinear", [name + "_quantized", scale_t.name, zp_t.name],
                                               [out], name + "_DequantizeLinear", axis=axis))
        self.quantized[name] = (name + "_quantized", scale_t.name, zp_t.name)

    def add_qdq_pair_for_activation(self, name, scale_name, zp_name):
        q_in, dq_out = name, name + "_DequantizeLinear_Output"
        if self.is_graph_output(name):
            q_in, dq_out = name + "_QuantizeLinear_Input", name
            self.replace_output_of_all_nodes(name, q_in)
        else:
            self.replace_input_of_all_nodes(name, dq_out)
        q_out = name + "_QuantizeLinear_Output"
        self.new_nodes.append(helper.make_node("QuantizeLinear", [q_in, scale_name, zp_name], [q_out],
                                               name + "_QuantizeLinear"))
        self.new_nodes.append(helper.make_node("DequantizeLinear", [q_out, scale_name, zp_name], [dq_out],
                                               name + "_DequantizeLinear"))
        self.quantized[name] = (dq_out, scale_name, zp_name)

    def quantize_normal_tensors(self):
        for name, info in list(self.tensors_to_quantize.items()):
            if name in self.quantized or info["provider"] is not None:
                continue
            if name in self.inits:
                self.add_qdq_pair_for_initializer(name, info)
            else:
                if name not in self.params:
                    raise RuntimeError(f"no calibrated range for {name!r}")
                zp, scale = self.params[name]
                zp_t = helper.make_tensor(name + "_zero_point", self.act_type, [], [int(zp)])
                scale_t = helper.make_tensor(name + "_scale", TensorProto.FLOAT, [], [float(scale)])
                self.add_init(zp_t)
                self.add_init(scale_t)
                self.add_qdq_pair_for_activation(name, scale_t.name, zp_t.name)
            del self.tensors_to_quantize[name]

    def quantize_sharing_param_tensors(self):
        while self.tensors_to_quantize:
            progress = False
            for name, info in list(self.tensors_to_quantize.items()):
                p = info["provider"]
                if p in self.quantized:
                    del self.tensors_to_quantize[name]
                    _, scale_name, zp_name = self.quantized[p]
                    self.add_qdq_pair_for_activation(name, scale_name, zp_name)
                    progress = True
            if not progress:
                raise RuntimeError("shared quantization parameters without a quantized provider: "
                                   + ", ".join(self.tensors_to_quantize))

    def quantize_bias_tensors(self):
        for bias, (node_name, inp, weight, beta) in self.bias_to_quantize.items():
            w_scale = numpy_helper.to_array(self.inits[self.quantized[weight][1]])
            x_scale = numpy_helper.to_array(self.inits[self.quantized[inp][1]])
            b = numpy_helper.to_array(self.inits[bias])
            bias_scale = x_scale * w_scale * beta  # float32 products (base_quantizer quantize_bias_static_impl)
            q = np.asarray(b, dtype=np.float64) / np.asarray(bias_scale, dtype=np.float64)
            q = q.round()
            i32 = np.iinfo(np.int32)
            q = np.clip(q, np.float64(i32.min), np.float64(i32.max)).astype(np.int32).reshape(b.shape)
            qname = bias + "_quantized"
            self.add_init(numpy_helper.from_array(q, qname))
            scale_data = np.asarray(bias_scale, dtype=b.dtype).reshape(-1)
            self.add_init(numpy_helper.from_array(scale_data, qname + "_scale"))
            if bias_scale.size > 1:
                zp_t = numpy_helper.from_array(np.zeros(bias_scale.shape, np.int32).reshape(-1), qname + "_zero_point")
            else:
                zp_t = helper.make_tensor(qname + "_zero_point", TensorProto.INT32, [], [0])
            self.add_init(zp_t)
            self.new_nodes.append(helper.make_node(
                "DequantizeLinear", [qname, qname + "_scale", qname + "_zero_point"], [bias],
                bias + "_DequantizeLinear", axis=0 if bias_scale.size > 1 else None))
            self.quantized[bias] = (qname, qname + "_scale", qname + "_zero_point")

    def quantize_model(self):
        for n in list(self.g.node):
            if n.op_type in OPS:
                self.quantize_node(n)
        self.quantize_normal_tensors()
        self.quantize_sharing_param_tensors()
        self.quantize_bias_tensors()
        removed = {id(n) for n in self.nodes_to_remove}
        nodes = [n for n in self.g.node if id(n) not in removed] + self.new_nodes
        self.g.initializer.extend(self.new_inits)
        # the float biases are now DequantizeLinear outputs of the same name (remove_initializer)
        biases = set(self.bias_to_quantize)
        kept = [t for t in self.g.initializer if t.name not in biases]
        del self.g.initializer[:]
        self.g.initializer.extend(kept)
        # clean_initializers: the float originals of quantized tensors are no longer read
        used = {i for n in nodes for i in n.input}
        live = [t for t in self.g.initializer if t.name in used]
        del self.g.initializer[:]
        self.g.initializer.extend(live)
        del self.g.node[:]
        self.g.node.extend(topological(nodes, {i.name for i in self.g.input} | {t.name for t in live}))
        del self.g.value_info[:]  # (stale after the renames; nothing needs them)
        self.model.producer_name, self.model.producer_version = "onnx.quantize", "0.1.0"
        return self.model


def topological(nodes, available):
    """Nodes in a stable topological order (the checker requires one; ORT's quantizer sorts too)."""
    avail, out, pending = set(available) | {""}, [], list(nodes)
    while pending:
        rest = []
        for n in pending:
            if all(i in avail for i in n.input):
                out.append(n)
                avail.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            raise RuntimeError("the quantized graph has a cycle or an undefined input: " + rest[0].name)
        pending = rest
    return out


def quantize_model(model, calib_x, activations):
    """The QDQ form of a float ModelProto (changed in place), calibrated on calib_x [n, ...]."""
    per_use_copies(model)
    types, _ = tensor_types(model)
    ranges = calibrate(model, types, calib_x)
    return QDQQuantizer(model, ranges, types, activations).quantize_model()


def quantize(fp32_path, model_name, activations, n_calib, size):
    """The QDQ model (a ModelProto) of the zoo's float model at fp32_path, calibrated on n_calib
    seeded inputs (common.CALIB_SEED)."""
    q = quantize_model(onnx.load(fp32_path), common.inputs(model_name, n_calib, size, common.CALIB_SEED),
                       activations)
    q.metadata_props.add(key="tessera.qdq", value=f"activations={activations} calib={n_calib} "
                                                     f"seed={common.CALIB_SEED} (scripts/zoo/qdq.py)")
    return q


def model_name_of(path):
    base = os.path.splitext(os.path.basename(path))[0]
    return base if base in common.MODELS else None


def main():
    ap = argparse.ArgumentParser(description="Static QDQ quantization in onnxruntime's quantize_static form.")
    ap.add_argument("model", help="float ONNX model (from build.py: its name picks the calibration inputs)")
    ap.add_argument("out", help="output QDQ model")
    ap.add_argument("--activations", default="u8", help="u8 (asymmetric, default) or s8 (symmetric)")
    ap.add_argument("--calib", default="16", help="calibration inputs (default 16)")
    ap.add_argument("--size", default=None, help="image side of the calibration inputs (default: the model's)")
    ap.add_argument("--kind", default=None, help="image or tokens, for a model not named after the zoo")
    a = ap.parse_args()
    if a.activations not in ("u8", "s8"):
        raise UsageError(f"--activations {a.activations!r}: must be u8 or s8")
    n = common.parse_count(a.calib, "--calib", 1, 10000)
    if not os.path.isfile(a.model):
        raise UsageError(f"{a.model}: no such file")
    try:
        m = onnx.load(a.model, load_external_data=False)
    except Exception as e:  # noqa: BLE001 - any parse failure is one line
        raise UsageError(f"{a.model}: not an ONNX model ({type(e).__name__})") from None
    if not m.graph.node or not m.graph.input or not m.graph.output:
        raise UsageError(f"{a.model}: not an ONNX model (no graph, inputs or outputs)")
    try:
        onnx.checker.check_model(m)
    except onnx.checker.ValidationError as e:
        raise UsageError(f"{a.model}: invalid ONNX model: {str(e).splitlines()[0]}") from None
    name = model_name_of(a.model)
    kind = a.kind or ("tokens" if name in common.TOKEN_MODELS else "image")
    if kind not in ("image", "tokens"):
        raise UsageError(f"--kind {kind!r}: must be image or tokens")
    name = name or ("bert_tiny" if kind == "tokens" else "resnet18")  # only picks the input generator
    dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    size = common.parse_size(a.size) if a.size else (dims[-1] if kind == "image" and len(dims) == 4 else 224)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK):
        raise UsageError(f"{a.out}: the directory is not writable")
    common.require_ort()
    try:
        q = quantize(a.model, name, a.activations, n, size)
    except common.OrtError as e:
        raise UsageError(f"{a.model}: ONNX Runtime failed in calibration: {e}") from None
    common.save_onnx(a.out, q)
    print(f"qdq: {a.out} ({a.activations}, {n} calibration inputs)")
    return 0


if __name__ == "__main__":
    sys.exit(common.main_guard(main))
