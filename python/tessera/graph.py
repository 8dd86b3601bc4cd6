"""tessera.Graph: the graph builder over the C graph runtime (jit/tsr_graph.h). Tensors are NCHW,
int8/uint8 with a zero point; every node is validated by the library as it is added (errors name the
node); the graph is planned on its device at the first run (kernels, weights uploaded once,
activations in one DRAM arena) and then runs many times on new inputs.

    g = tessera.Graph(dev)
    x = g.input((1, 3, 32, 32), np.int8)
    h = g.conv2d(x, w1, b1, stride=2, pad=1, x_scale=..., w_scale=..., y_scale=..., relu=True)
    y = g.dense(g.global_avgpool(h), w2, mult=..., shift=...)
    out = g.run(x_array)                         # numpy, the graph's output

Operator arguments are tessera.op's (the CLI's flags by name)."""
import numpy as np

from . import _params as P
from ._base import Error, _arg, _check, ffi, lib
from .report import Report, graph_rows

__all__ = ["Graph", "Tensor"]


def _np_dtype(code):
    return np.dtype(np.uint8) if code == lib.TSR_DT_UINT8 else np.dtype(np.int8)


class Tensor:
    """A tensor of a Graph: .shape (N, C, H, W), .dtype, .zp, .name (its producer, or the input's name)."""

    def __init__(self, graph, tid, shape, dtype, zp, name):
        self.graph, self.id, self.shape, self.dtype, self.zp, self.name = graph, tid, tuple(shape), dtype, zp, name

    def _desc(self):
        return (*self.shape, P.qdtype(self.dtype, "dtype")[0], self.dtype, self.zp)

    def __repr__(self):
        return "<tessera.Tensor %s %s %s zp %d>" % (self.name, self.shape, np.dtype(self.dtype).name, self.zp)


class Graph:
    """A graph of quantized operators for a device (tessera.Device)."""

    def __init__(self, device):
        from . import Device
        if not isinstance(device, Device):
            raise _arg("device", "needs a tessera.Device, not %s" % type(device).__name__)
        device._handle("device")
        self._dev = device
        out = ffi.new("tsr_graph_t **")
        _check(lib.tsr_graph_create(device._cfg, out))
        self._g = ffi.gc(out[0], lib.tsr_graph_free)
        self._inputs, self._outputs, self._names = [], [], set()
        self._planned = False
        device._models.add(self)  # freed before the device closes (the plan holds device memory)

    # ------------------------------------------------------------ building

    def _handle(self):
        if self._g is None:
            raise Error("graph: its device is closed", lib.TSR_EINVAL)
        if self._planned:
            raise Error("graph: already planned (it ran): build a new Graph to add nodes", lib.TSR_EINVAL)
        return self._g

    def _release(self):
        if self._g is not None:
            g, self._g = self._g, None
            ffi.release(g)

    def _tensor(self, shape, dtype, zp, name):
        tid = ffi.new("int *")
        _check(lib.tsr_graph_tensor(self._handle(), shape[0], shape[1], shape[2], shape[3],
                                    P.qdtype(dtype, "dtype")[0], zp, tid))
        self._last = Tensor(self, tid[0], shape, np.dtype(dtype), zp, name)
        return self._last

    def _x(self, t, name="x"):
        if not isinstance(t, Tensor) or t.graph is not self:
            raise _arg(name, "needs a Tensor of this graph (from input() or an operator), not %s" % type(t).__name__)
        return t

    def _node_name(self, name, kind):
        name = P.check_name(name, "%s%d" % (kind, len(self._names)))
        self._names.add(name)
        return name

    def input(self, shape, dtype=np.int8, zp=0, name=None):
        """A graph input of shape (N, C, H, W) (or (N, K): read as (N, K, 1, 1)); run() takes one array per
        input, in the order they were declared."""
        shp = tuple(shape) if isinstance(shape, (tuple, list)) else None
        if not shp or len(shp) not in (2, 4) or not all(P.is_int(v) and 1 <= v <= 2**31 - 1 for v in shp):
            raise _arg("shape", "needs (N, C, H, W) or (N, K), positive integers, not %r" % (shape,))
        shp = shp + (1, 1) if len(shp) == 2 else shp
        dt = P.qdtype(dtype, "dtype")[1]
        name = P.check_name(name, "x" if not self._inputs else "x%d" % len(self._inputs))
        t = self._tensor(shp, dt, P.zp(zp, dt, "zp"), name)
        self._inputs.append(t)
        return t

    def conv2d(self, x, w, b=None, *, stride=1, pad=0, groups=1, w_zp=0, y_zp=0, y_dtype=None, mult=None,
               shift=None, x_scale=None, w_scale=None, y_scale=None, act_min=None, act_max=None, relu=False,
               relu6=False, name=None):
        """conv2d + bias + requantization + clamp (tessera.op.conv2d's arguments; the input's zero point
        is x's). w [C_out, C_in/groups, KH, KW]; groups 1, C_in (depthwise) or what the library takes."""
        x = self._x(x)
        w = P.array(w, "w", (np.int8, np.uint8), ndim=4)
        keep = []
        p = ffi.new("tsr_conv2d_params_t *")
        p.n, p.c_in, p.h, p.w = x.shape
        p.c_out, p.kh, p.kw = w.shape[0], w.shape[2], w.shape[3]
        if not P.is_int(groups) or groups < 1 or p.c_in % groups:
            raise _arg("groups", "needs a positive integer dividing C_in %d, not %r" % (p.c_in, groups))
        p.groups = groups
        if w.shape[1] != p.c_in // groups:
            raise _arg("w", "shape %s, expected (C_out, %d, KH, KW) for x %s" % (tuple(w.shape), p.c_in // groups,
                                                                               x.shape))
        p.stride_h, p.stride_w, p.pad_top, p.pad_left, p.pad_bottom, p.pad_right = P.window(stride, pad)
        xd = P.qdtype(x.dtype, "x")
        p.x_dtype, p.x_zp, p.w_dtype = xd[0], x.zp, P.qdtype(w.dtype, "w")[0]
        bias = P.bias(b, p.c_out, keep)
        P.quant(p, keep, xd, p.c_out, w_zp, y_zp, y_dtype, mult, shift, x_scale, w_scale, y_scale, act_min,
                act_max, relu, relu6)
        oh, ow = ffi.new("int *"), ffi.new("int *")
        _check(lib.tsr_conv2d_check(p, oh, ow))
        name = self._node_name(name, "conv")
        y = self._tensor((p.n, p.c_out, oh[0], ow[0]), _np_dtype(p.y_dtype),
                         p.y_zp, name)
        _check(lib.tsr_graph_conv2d(self._g, name.encode(), x.id, y.id, p, ffi.from_buffer(w), bias))
        return y

    def dense(self, x, w, b=None, *, w_zp=0, y_zp=0, y_dtype=None, mult=None, shift=None, x_scale=None,
              w_scale=None, y_scale=None, act_min=None, act_max=None, relu=False, relu6=False, name=None):
        """Fully connected over x (N, K, 1, 1) (reshape a pooled tensor first if needed): w [M, K];
        the output is (N, M, 1, 1)."""
        x = self._x(x)
        w = P.array(w, "w", (np.int8, np.uint8), ndim=2)
        k = x.shape[1] * x.shape[2] * x.shape[3]
        if w.shape[1] != k:
            raise _arg("w", "shape %s, expected (M, %d) for x %s" % (tuple(w.shape), k, x.shape))
        keep = []
        p = ffi.new("tsr_dense_params_t *")
        p.n, p.k, p.m = x.shape[0], k, w.shape[0]
        xd = P.qdtype(x.dtype, "x")
        p.x_dtype, p.x_zp, p.w_dtype = xd[0], x.zp, P.qdtype(w.dtype, "w")[0]
        bias = P.bias(b, p.m, keep)
        P.quant(p, keep, xd, p.m, w_zp, y_zp, y_dtype, mult, shift, x_scale, w_scale, y_scale, act_min, act_max,
                relu, relu6)
        _check(lib.tsr_dense_check(p, ffi.NULL))
        name = self._node_name(name, "dense")
        y = self._tensor((p.n, p.m, 1, 1), _np_dtype(p.y_dtype), p.y_zp, name)
        _check(lib.tsr_graph_dense(self._g, name.encode(), x.id, y.id, p, ffi.from_buffer(w), bias))
        return y

    def add(self, a, b, *, y_zp=0, y_dtype=None, scales=None, params=None, act_min=None, act_max=None, relu=False,
            relu6=False, name=None):
        """Quantized add of two tensors of one shape (tessera.op.add's arguments; the zero points are the
        tensors')."""
        a, b = self._x(a, "a"), self._x(b, "b")
        if a.shape != b.shape:
            raise _arg("b", "shape %s differs from a's %s (no broadcasting)" % (b.shape, a.shape))
        yd = P.qdtype(y_dtype, "y_dtype") if y_dtype is not None else P.qdtype(a.dtype, "a")
        yz = P.zp(y_zp, yd[1], "y_zp")
        p = ffi.new("tsr_add_params_t *")
        P.add_params(p, a._desc(), b._desc(), (*a.shape, yd[0], yd[1], yz), None, scales, params, act_min, act_max,
                     relu, relu6)
        _check(lib.tsr_add_check(p, ffi.NULL))
        name = self._node_name(name, "add")
        y = self._tensor(a.shape, yd[1], yz, name)
        _check(lib.tsr_graph_add(self._g, name.encode(), a.id, b.id, y.id, p))
        return y

    def _pool(self, kind, x, kernel, stride, pad, count_include_pad, name):
        x = self._x(x)
        p = ffi.new("tsr_pool_params_t *")
        p.kind = kind
        p.n, p.c, p.h, p.w = x.shape
        p.dtype, p.zp = P.qdtype(x.dtype, "x")[0], x.zp
        if kind != lib.TSR_POOL_GLOBAL_AVG:
            k = (kernel,) if P.is_int(kernel) else tuple(kernel) if isinstance(kernel, (tuple, list)) else ()
            if len(k) not in (1, 2) or not all(P.is_int(v) and v >= 1 for v in k):
                raise _arg("kernel", "needs K or (KH, KW), positive integers, not %r" % (kernel,))
            p.kh, p.kw = k[0], k[-1]
            p.stride_h, p.stride_w, p.pad_top, p.pad_left, p.pad_bottom, p.pad_right = P.window(stride, pad)
            p.count_include_pad = 1 if count_include_pad else 0
        oh, ow = ffi.new("int *"), ffi.new("int *")
        _check(lib.tsr_pool_check(p, oh, ow))
        name = self._node_name(name, "pool")
        y = self._tensor((p.n, p.c, oh[0], ow[0]), x.dtype, x.zp, name)
        _check(lib.tsr_graph_pool(self._g, name.encode(), x.id, y.id, p))
        return y

    def maxpool(self, x, kernel, stride=1, pad=0, name=None):
        """Max over KH x KW windows (stride 1 by default, as the CLI and ONNX); padding never wins."""
        return self._pool(lib.TSR_POOL_MAX, x, kernel, stride, pad, False, name)

    def avgpool(self, x, kernel, stride=1, pad=0, count_include_pad=False, name=None):
        """Rounded average over KH x KW windows (TFLite AVERAGE_POOL_2D)."""
        return self._pool(lib.TSR_POOL_AVG, x, kernel, stride, pad, count_include_pad, name)

    def global_avgpool(self, x, name=None):
        """Rounded average over each H x W plane -> (N, C, 1, 1)."""
        return self._pool(lib.TSR_POOL_GLOBAL_AVG, x, 1, 1, 0, False, name)

    def clip(self, x, lo, hi, name=None):
        """y = clamp(x, lo, hi) (same dtype and zero point)."""
        x = self._x(x)
        p = ffi.new("tsr_clip_params_t *")
        for d in (p.x, p.y):
            d.n, d.c, d.h, d.w = x.shape
            d.dtype, d.zp = P.qdtype(x.dtype, "x")[0], x.zp
        p.lo, p.hi = P.zp(lo, x.dtype, "lo"), P.zp(hi, x.dtype, "hi")
        _check(lib.tsr_clip_check(p, ffi.NULL))
        name = self._node_name(name, "clip")
        y = self._tensor(x.shape, x.dtype, x.zp, name)
        _check(lib.tsr_graph_clip(self._g, name.encode(), x.id, y.id, p))
        return y

    def relu(self, x, name=None):
        """y = max(x, x's zero point)."""
        x = self._x(x)
        return self.clip(x, x.zp, 255 if x.dtype == np.uint8 else 127, name=P.check_name(name, "relu%d" % len(
            self._names)))

    def requantize(self, x, *, y_zp=0, y_dtype=None, mult=None, shift=None, x_scale=None, y_scale=None,
                   act_min=None, act_max=None, relu=False, relu6=False, name=None):
        """y = clamp(requant(x - x_zp) + y_zp, ...): a tensor moved to another scale and zero point
        (tsr_graph_requantize; the output stage of conv2d alone). mult/shift per tensor or per channel,
        or the real ratio as x_scale and y_scale."""
        x = self._x(x)
        keep = []
        p = ffi.new("tsr_requant_params_t *")
        p.n, p.c, p.h, p.w = x.shape
        xd = P.qdtype(x.dtype, "x")
        p.x_dtype, p.x_zp = xd[0], x.zp
        ws = None if x_scale is None and y_scale is None else 1.0
        P.quant(p, keep, xd, p.c, None, y_zp, y_dtype, mult, shift, x_scale, ws, y_scale, act_min, act_max,
                relu, relu6)
        name = self._node_name(name, "requant")
        y = self._tensor(x.shape, _np_dtype(p.y_dtype), p.y_zp, name)
        _check(lib.tsr_graph_requantize(self._g, name.encode(), x.id, y.id, p))
        return y

    def act(self, x, fn, y_dtype=None, y_zp=None, name=None):
        """An activation table (config key ACT_LUT > 0; jit/tsr_act.h): y = fn(x) for every value of x's
        type, computed once here (fn gets all 256 values as an int64 array and returns integers in
        y's type), applied on the device as one table lookup per element. y_dtype and y_zp default
        to x's."""
        x = self._x(x)
        if not callable(fn):
            raise _arg("fn", "needs a function of an int64 array of x's 256 values")
        yc, ydt = P.qdtype(y_dtype, "y_dtype") if y_dtype is not None else P.qdtype(x.dtype, "x")
        yz = P.zp(x.zp if y_zp is None else y_zp, ydt, "y_zp")
        xs = np.arange(0, 256, dtype=np.int64) if x.dtype == np.uint8 else np.arange(-128, 128, dtype=np.int64)
        try:
            ys = np.asarray(fn(xs.copy()))
        except Exception as e:  # the caller's function: its failure, named
            raise _arg("fn", "raised %s: %s" % (type(e).__name__, e)) from None
        lo, hi = (0, 255) if ydt == np.uint8 else (-128, 127)
        if ys.shape != (256,) or ys.dtype.kind not in "iu" or ys.min() < lo or ys.max() > hi:
            raise _arg("fn", "must return 256 integers in [%d, %d] (y is %s)" % (lo, hi, ydt.name))
        # device terms (tsr_act.h): entry[(x - off_x) & 255] = y - off_y, off = 128 for uint8
        offx, offy = (128 if x.dtype == np.uint8 else 0), (128 if ydt == np.uint8 else 0)
        vals = ffi.new("int32_t[256]")
        for xv, yv in zip(xs.tolist(), ys.tolist()):
            vals[(xv - offx) & 255] = yv - offy
        t = ffi.new("tsr_act_table_t *")
        _check(lib.tsr_act_table_from_values(vals, t))
        name = self._node_name(name, "act")
        y = self._tensor(x.shape, ydt, yz, name)
        _check(lib.tsr_graph_act(self._g, name.encode(), x.id, y.id, t))
        return y

    def reshape(self, x, shape, name=None):
        """The same bytes under another (N, C, H, W) (same N, C and H*W: the device layout is unchanged)."""
        x = self._x(x)
        shp = tuple(shape) if isinstance(shape, (tuple, list)) else None
        if not shp or len(shp) != 4 or not all(P.is_int(v) and v >= 1 for v in shp):
            raise _arg("shape", "needs (N, C, H, W), positive integers, not %r" % (shape,))
        name = self._node_name(name, "reshape")
        y = self._tensor(shp, x.dtype, x.zp, name)
        _check(lib.tsr_graph_reshape(self._g, name.encode(), x.id, y.id))
        return y

    def concat(self, *xs, name=None):
        """xs (two or more, one dtype and zero point, the same N, H, W) along channels, as views of one
        device tensor: no copy (each but the last needs channels a multiple of the config's BLOCK, and N
        <= BATCH; an input that cannot be a view, such as a graph input, is copied on the device first)."""
        if len(xs) < 2:
            raise _arg("xs", "needs two or more tensors, not %d" % len(xs))
        xs = [self._x(x, "xs") for x in xs]
        name = self._node_name(name, "concat")
        y = xs[0]
        for k, b in enumerate(xs[1:], 1):
            shp = (y.shape[0], y.shape[1] + b.shape[1], y.shape[2], y.shape[3])
            nm = name if k == len(xs) - 1 else "%s.%d" % (name[:40], k)
            t = self._tensor(shp, y.dtype, y.zp, nm)
            _check(lib.tsr_graph_concat(self._g, nm.encode(), y.id, b.id, t.id))
            y = t
        return y

    def output(self, *ts):
        """Mark tensors as the graph's outputs (run() returns them in this order). Without any, the last
        tensor made is the output."""
        for t in ts:
            self._x(t, "output")
            _check(lib.tsr_graph_output(self._handle(), t.id))
            self._outputs.append(t)
        return ts[0] if len(ts) == 1 else ts

    # ------------------------------------------------------------ running

    def plan(self):
        """Plan the graph on its device (run() does it the first time)."""
        if self._planned:
            return
        g = self._handle()
        if not self._inputs:
            raise Error("graph: no input (Graph.input)", lib.TSR_EINVAL)
        if not self._outputs:
            self.output(self._last)
        lock = self._dev._busy("device")
        try:
            _check(lib.tsr_graph_plan(g, self._dev._dev, 0))
        finally:
            lock.release()
        self._planned = True

    def run(self, *xs):
        """Run on one array per input (each C-contiguous, the input's dtype and shape); returns the output
        array, or a tuple of them when several were marked (None on a timing_only device: the report
        has the cycles, the data is not computed)."""
        if self._g is None:
            raise Error("graph: its device is closed", lib.TSR_EINVAL)
        self._dev._handle("device")
        if len(xs) != len(self._inputs):
            raise _arg("x", "%d arrays given, the graph has %d inputs (%s)" % (
                len(xs), len(self._inputs), ", ".join(t.name for t in self._inputs)))
        arrs = []
        for t, a in zip(self._inputs, xs):
            a = P.array(a, t.name, (t.dtype,))
            want = t.shape if a.ndim == 4 else t.shape[:2]
            if tuple(a.shape) != want:
                raise _arg(t.name, "shape %s, the graph's input is %s" % (tuple(a.shape), want))
            arrs.append(a)
        self.plan()
        ins = ffi.new("void *[]", [ffi.cast("void *", ffi.from_buffer(a)) for a in arrs])
        outs = [np.empty(t.shape, t.dtype) for t in self._outputs]
        optr = ffi.new("void *[]", [ffi.cast("void *", ffi.from_buffer(o)) for o in outs])
        lock = self._dev._busy("device")
        try:
            rc = lib.tsr_graph_exec(self._g, ins, optr)
        finally:
            lock.release()
        _check(rc)
        if self._dev.timing_only:  # the cycles only: the outputs were never computed
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def report(self):
        """The per-layer table of the last run (tessera.report.Report)."""
        if self._g is None:
            raise Error("graph: its device is closed", lib.TSR_EINVAL)
        if not self._planned:
            raise Error("graph: not planned yet (run it first)", lib.TSR_EINVAL)
        return Report(*graph_rows(self._g, self._dev._cfg))

    @property
    def report_text(self):
        """The table as `tsr_graph_print_report` prints it."""
        if self._g is None or not self._planned:
            raise Error("graph: not planned yet (run it first)", lib.TSR_EINVAL)
        p = lib.tsr_py_graph_report(self._g)
        if p == ffi.NULL:
            raise Error("out of memory", lib.TSR_ENOMEM)
        try:
            return ffi.string(p).decode("utf-8", "replace")
        finally:
            lib.free(p)
