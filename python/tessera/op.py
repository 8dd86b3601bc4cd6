"""One quantized operator on a device, as `tessera op OPERATOR` runs it (jit/tsr_oprun.h: plan, write,
run, read, free): the same parameters from the same arguments, the same bytes out.

    y = tessera.op.conv2d(dev, x, w, b, stride=2, pad=1, x_scale=0.02, w_scale=ws, y_scale=0.05, relu=True)

The arguments are the CLI's flags by name (--x-zp -> x_zp, ...); requantization is mult/shift or the
three scales (TFLite's QuantizeMultiplier); the clamp act_min/act_max, relu or relu6. info=True also
returns a dict of the run's figures (cycles on timed backends, MACs, instructions, times). On a
timing_only device the result is None (the cycles are in the figures)."""
import numpy as np

from . import _params as P
from ._base import _arg, _check, ffi, lib

__all__ = ["conv2d", "dense", "add", "maxpool", "avgpool", "global_avgpool", "relu", "clip"]

_IN = (np.int8, np.uint8)


def _device(dev):
    from . import Device
    if not isinstance(dev, Device):
        raise _arg("dev", "needs a tessera.Device, not %s" % type(dev).__name__)
    dev._handle("dev")
    return dev


def _run(dev, kind, p, x, w, bias, y, info):
    oi = ffi.new("tsr_oprun_info_t *")
    lock = dev._busy("dev")
    try:
        rc = lib.tsr_oprun(dev._dev, kind, p, ffi.from_buffer(x), ffi.from_buffer(w) if w is not None else ffi.NULL,
                           bias, ffi.from_buffer(y), oi)
    finally:
        lock.release()
    _check(rc)
    if dev.timing_only:  # the cycles only: y was never computed
        y = None
    if not info:
        return y
    return y, {"cycles": int(oi.ctr.cycles), "macs": int(oi.ctr.macs), "gemm_ops": int(oi.ctr.gemm_ops),
               "alu_ops": int(oi.ctr.alu_ops), "instructions": int(oi.ninsns), "exec_s": float(oi.exec_s),
               "plan_ms": float(oi.plan_ms)}


def conv2d(dev, x, w, b=None, *, stride=1, pad=0, groups=1, x_zp=0, w_zp=0, y_zp=0, y_dtype=None, mult=None,
           shift=None, x_scale=None, w_scale=None, y_scale=None, act_min=None, act_max=None, relu=False,
           relu6=False, info=False):
    """Quantized conv2d (jit/operators.md "conv2d"), NCHW: x [N, C_in, H, W] int8/uint8, w [C_out,
    C_in/groups, KH, KW] int8/uint8, b int32 [C_out] or None; groups 1 or C_in (depthwise).
    Returns y [N, C_out, OH, OW] (y_dtype: default x's)."""
    dev = _device(dev)
    x = P.array(x, "x", _IN, ndim=4)
    w = P.array(w, "w", _IN, ndim=4)
    keep = []
    p = ffi.new("tsr_conv2d_params_t *")
    p.n, p.c_in, p.h, p.w = x.shape
    p.c_out, p.kh, p.kw = w.shape[0], w.shape[2], w.shape[3]
    if not P.is_int(groups) or groups not in (1, p.c_in):
        raise _arg("groups", "only 1 or the input channel count %d (depthwise), not %r" % (p.c_in, groups))
    p.groups = groups
    if w.shape[1] != p.c_in // groups or (groups > 1 and p.c_out != p.c_in):
        raise _arg("w", "shape %s, expected (%s, %d, KH, KW) for x %s" % (tuple(w.shape), "C_in" if groups > 1
                   else "C_out", p.c_in // groups, tuple(x.shape)))
    p.stride_h, p.stride_w, p.pad_top, p.pad_left, p.pad_bottom, p.pad_right = P.window(stride, pad)
    xd = P.qdtype(x.dtype, "x")
    p.x_dtype, p.x_zp = xd[0], P.zp(x_zp, x.dtype, "x_zp")
    p.w_dtype = P.qdtype(w.dtype, "w")[0]
    bias = P.bias(b, p.c_out, keep)
    P.quant(p, keep, xd, p.c_out, w_zp, y_zp, y_dtype, mult, shift, x_scale, w_scale, y_scale, act_min, act_max,
            relu, relu6)
    oh, ow = ffi.new("int *"), ffi.new("int *")
    _check(lib.tsr_conv2d_check(p, oh, ow))
    y = np.empty((p.n, p.c_out, oh[0], ow[0]), P.qdtype(y_dtype, "y_dtype")[1] if y_dtype is not None else x.dtype)
    return _run(dev, lib.TSR_OPRUN_CONV2D, p, x, w, bias, y, info)


def dense(dev, x, w, b=None, *, x_zp=0, w_zp=0, y_zp=0, y_dtype=None, mult=None, shift=None, x_scale=None,
          w_scale=None, y_scale=None, act_min=None, act_max=None, relu=False, relu6=False, info=False):
    """Quantized fully connected layer (jit/operators.md "dense"): x [N, K] (any rank >= 2, read as
    [N, rest]), w [M, K], b int32 [M] or None; returns y [N, M]."""
    dev = _device(dev)
    x = P.array(x, "x", _IN)
    w = P.array(w, "w", _IN, ndim=2)
    if x.ndim < 2:
        raise _arg("x", "shape %s, expected [N, K] or [N, C, H, W]" % (tuple(x.shape),))
    k = x.size // x.shape[0] if x.shape[0] else 0
    if w.shape[1] != k:
        raise _arg("w", "shape %s, expected (M, %d) for x %s" % (tuple(w.shape), k, tuple(x.shape)))
    keep = []
    p = ffi.new("tsr_dense_params_t *")
    p.n, p.k, p.m = x.shape[0], k, w.shape[0]
    xd = P.qdtype(x.dtype, "x")
    p.x_dtype, p.x_zp = xd[0], P.zp(x_zp, x.dtype, "x_zp")
    p.w_dtype = P.qdtype(w.dtype, "w")[0]
    bias = P.bias(b, p.m, keep)
    P.quant(p, keep, xd, p.m, w_zp, y_zp, y_dtype, mult, shift, x_scale, w_scale, y_scale, act_min, act_max,
            relu, relu6)
    _check(lib.tsr_dense_check(p, ffi.NULL))
    y = np.empty((p.n, p.m), P.qdtype(y_dtype, "y_dtype")[1] if y_dtype is not None else x.dtype)
    return _run(dev, lib.TSR_OPRUN_DENSE, p, x, w, bias, y, info)


def add(dev, a, b, *, a_zp=0, b_zp=0, y_zp=0, y_dtype=None, scales=None, params=None, act_min=None, act_max=None,
        relu=False, relu6=False, info=False):
    """Quantized elementwise add (jit/operators.md "add", TFLite ADD): a and b of one shape (no
    broadcasting), each its dtype and zero point; scales=(a_scale, b_scale, y_scale) or
    params=(left_shift, mult_a, shift_a, mult_b, shift_b, mult_out, shift_out). Returns y."""
    dev = _device(dev)
    a = P.array(a, "a", _IN)
    b = P.array(b, "b", _IN)
    if a.shape != b.shape:
        raise _arg("b", "shape %s differs from a's %s (no broadcasting)" % (tuple(b.shape), tuple(a.shape)))
    if not 1 <= a.size <= 2**31 - 1:
        raise _arg("a", "%d elements (need 1 to 2^31 - 1)" % a.size)
    ad, bd = P.qdtype(a.dtype, "a"), P.qdtype(b.dtype, "b")
    yd = P.qdtype(y_dtype, "y_dtype") if y_dtype is not None else ad
    flat = lambda d, z: (1, 1, 1, a.size, d[0], d[1], z)  # noqa: E731  (one vector, as the CLI)
    p = ffi.new("tsr_add_params_t *")
    P.add_params(p, flat(ad, P.zp(a_zp, a.dtype, "a_zp")), flat(bd, P.zp(b_zp, b.dtype, "b_zp")),
                 flat(yd, P.zp(y_zp, yd[1], "y_zp")), None, scales, params, act_min, act_max, relu, relu6)
    _check(lib.tsr_add_check(p, ffi.NULL))
    y = np.empty(a.shape, yd[1])
    return _run(dev, lib.TSR_OPRUN_ADD, p, a, b, ffi.NULL, y, info)


def _pool(dev, kind, x, kernel, stride, pad, x_zp, count_include_pad, info):
    dev = _device(dev)
    x = P.array(x, "x", _IN, ndim=4)
    p = ffi.new("tsr_pool_params_t *")
    p.kind = kind
    p.n, p.c, p.h, p.w = x.shape
    p.dtype, p.zp = P.qdtype(x.dtype, "x")[0], P.zp(x_zp, x.dtype, "x_zp")
    if kind == lib.TSR_POOL_GLOBAL_AVG:
        p.kh, p.kw, p.stride_h, p.stride_w = p.h, p.w, 1, 1
    else:
        k = (kernel,) if P.is_int(kernel) else tuple(kernel) if isinstance(kernel, (tuple, list)) else ()
        if len(k) not in (1, 2) or not all(P.is_int(v) and 1 <= v <= 1 << 16 for v in k):
            raise _arg("kernel", "needs K or (KH, KW), positive integers, not %r" % (kernel,))
        p.kh, p.kw = k[0], k[-1]
        p.stride_h, p.stride_w, p.pad_top, p.pad_left, p.pad_bottom, p.pad_right = P.window(stride, pad)
        p.count_include_pad = 1 if count_include_pad else 0
    oh, ow = ffi.new("int *"), ffi.new("int *")
    _check(lib.tsr_pool_check(p, oh, ow))
    y = np.empty((p.n, p.c, oh[0], ow[0]), x.dtype)
    return _run(dev, lib.TSR_OPRUN_POOL, p, x, None, ffi.NULL, y, info)


def maxpool(dev, x, kernel, *, stride=1, pad=0, x_zp=0, info=False):
    """Max over KH x KW windows (padding never wins); x [N, C, H, W]; stride and pad as conv2d's
    (default 1 and 0, as the CLI's)."""
    return _pool(dev, lib.TSR_POOL_MAX, x, kernel, stride, pad, x_zp, False, info)


def avgpool(dev, x, kernel, *, stride=1, pad=0, x_zp=0, count_include_pad=False, info=False):
    """Rounded average over KH x KW windows (TFLite AVERAGE_POOL_2D)."""
    return _pool(dev, lib.TSR_POOL_AVG, x, kernel, stride, pad, x_zp, count_include_pad, info)


def global_avgpool(dev, x, *, x_zp=0, info=False):
    """Rounded average over each H x W plane -> [N, C, 1, 1]."""
    return _pool(dev, lib.TSR_POOL_GLOBAL_AVG, x, None, 1, 0, x_zp, False, info)


def _flat(dev, x, x_zp):
    """x as one vector (the CLI's flat descriptor: the shape does not matter to the lowering)."""
    dev = _device(dev)
    x = P.array(x, "x", _IN)
    if not 1 <= x.size <= 2**31 - 1:
        raise _arg("x", "%d elements (need 1 to 2^31 - 1)" % x.size)
    d = ffi.new("tsr_eltwise_desc_t *")
    d.n, d.c, d.h, d.w = 1, 1, 1, x.size
    d.dtype, d.zp = P.qdtype(x.dtype, "x")[0], P.zp(x_zp, x.dtype, "x_zp")
    return dev, x, d


def _clip_run(dev, x, p, info):
    _check(lib.tsr_clip_check(p, ffi.NULL))
    return _run(dev, lib.TSR_OPRUN_CLIP, p, x, None, ffi.NULL, np.empty(x.shape, x.dtype), info)


def relu(dev, x, *, x_zp=0, info=False):
    """y = max(x, x_zp) (tsr_relu_params, as `tessera op relu`)."""
    dev, x, d = _flat(dev, x, x_zp)
    p = ffi.new("tsr_clip_params_t *")
    _check(lib.tsr_relu_params(d, p))
    return _clip_run(dev, x, p, info)


def clip(dev, x, lo, hi, *, x_zp=0, info=False):
    """y = clamp(x, lo, hi), integer bounds in x's type (same dtype and zero point in and out)."""
    dev, x, d = _flat(dev, x, x_zp)
    p = ffi.new("tsr_clip_params_t *")
    p.x, p.y = d[0], d[0]
    p.lo, p.hi = P.zp(lo, x.dtype, "lo"), P.zp(hi, x.dtype, "hi")
    if p.lo > p.hi:
        raise _arg("lo", "%d is above hi %d" % (p.lo, p.hi))
    return _clip_run(dev, x, p, info)
