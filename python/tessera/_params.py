"""Operator parameters from Python arguments, as `tessera op` derives them from its flags
(cli/tsr_cli_op.c): zero points, requantization (mult/shift, or the real scales through TFLite's
QuantizeMultiplier, tsr_quant_requant_params), clamps (act_min/act_max, relu, relu6), windows.
One place for tessera.op and tessera.Graph. Every refusal names the argument."""
import numbers

import numpy as np

from ._base import Error, _arg, _check, ffi, lib

_Q8 = {np.dtype(np.int8): "TSR_DT_INT8", np.dtype(np.uint8): "TSR_DT_UINT8"}
_RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def qdtype(d, name):
    """int8/uint8 (a numpy dtype or its name) -> (C code, numpy dtype)."""
    try:
        dt = np.dtype(d)
    except TypeError:
        raise _arg(name, "int8 or uint8, not %r" % (d,)) from None
    if dt not in _Q8:
        raise _arg(name, "int8 or uint8, not %s" % dt)
    return getattr(lib, _Q8[dt]), dt


def zp(v, dt, name):
    lo, hi = _RANGE[np.dtype(dt).name]
    if not is_int(v) or not lo <= v <= hi:
        raise _arg(name, "needs an integer in [%d, %d] (the tensor is %s), not %r" % (lo, hi, np.dtype(dt).name, v))
    return int(v)


def array(a, name, dtypes, ndim=None):
    """A C-contiguous numpy array of one of dtypes (read in place)."""
    if not isinstance(a, np.ndarray):
        raise _arg(name, "needs a numpy array, not %s" % type(a).__name__)
    if a.dtype not in [np.dtype(d) for d in dtypes] or not a.dtype.isnative:
        raise _arg(name, "dtype %s, expected %s" % (a.dtype, " or ".join(np.dtype(d).name for d in dtypes)))
    if ndim is not None and a.ndim != ndim:
        raise _arg(name, "shape %s, expected %d dimensions" % (tuple(a.shape), ndim))
    if not a.flags.c_contiguous:
        raise _arg(name, "not C-contiguous (use np.ascontiguousarray)")
    return a


def ivec(v, name, count, keep):
    """An integer or 1 or count integers -> a C int32 array (kept alive in keep)."""
    vals = [v] if is_int(v) else None
    if vals is None:
        a = np.asarray(v)
        if a.ndim > 1 or a.dtype.kind not in "iu" or a.size not in (1, count):
            raise _arg(name, "needs an integer or 1 or %d integers (one per output channel)" % count)
        vals = [int(x) for x in a.reshape(-1)]
    if any(not -2**31 <= x < 2**31 for x in vals):
        raise _arg(name, "a value outside int32")
    c = ffi.new("int32_t[]", vals)
    keep.append(c)
    return c, len(vals)


def dvec(v, name, count):
    """A real or 1 or count reals (float32 arrays widened exactly, as the CLI reads its .npy)."""
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return [float(v)]
    a = np.asarray(v)
    if a.ndim > 1 or a.dtype.kind != "f" or a.size not in (1, count):
        raise _arg(name, "needs a number or 1 or %d floats (one per output channel)" % count)
    return [float(x) for x in a.reshape(-1)]


def window(stride, pad, name_s="stride", name_p="pad"):
    """stride S or (SH, SW); pad P, (PH, PW) or (T, L, B, R) (ONNX order) -> sh, sw, t, l, b, r."""
    s = (stride,) if is_int(stride) else tuple(stride) if isinstance(stride, (tuple, list)) else None
    if not s or len(s) > 2 or not all(is_int(v) and 1 <= v <= 1 << 16 for v in s):
        raise _arg(name_s, "needs S or (SH, SW), positive integers, not %r" % (stride,))
    p = (pad,) if is_int(pad) else tuple(pad) if isinstance(pad, (tuple, list)) else None
    if not p or len(p) not in (1, 2, 4) or not all(is_int(v) and 0 <= v <= 1 << 16 for v in p):
        raise _arg(name_p, "needs P, (PH, PW) or (T, L, B, R), integers >= 0, not %r" % (pad,))
    p = p * 4 if len(p) == 1 else (p[0], p[1], p[0], p[1]) if len(p) == 2 else p
    return s[0], s[-1], p[0], p[1], p[2], p[3]


def quant(p, keep, x_dtype, cout, w_zp=0, y_zp=0, y_dtype=None, mult=None, shift=None, x_scale=None,
          w_scale=None, y_scale=None, act_min=None, act_max=None, relu=False, relu6=False):
    """Zero points, requantization and clamp of conv2d/dense into params p (get_quant of the CLI)."""
    xc, xdt = x_dtype
    yc, ydt = qdtype(y_dtype, "y_dtype") if y_dtype is not None else (xc, xdt)
    p.y_dtype, p.y_zp = yc, zp(y_zp, ydt, "y_zp")
    fixed = mult is not None or shift is not None
    scales = x_scale is not None or w_scale is not None or y_scale is not None
    if fixed and scales:
        raise _arg("mult", "give either mult/shift or x_scale/w_scale/y_scale, not both")
    if not fixed and not scales:
        raise _arg("mult", "no requantization given: mult and shift, or x_scale, w_scale and y_scale")
    if fixed:
        if mult is None or shift is None:
            raise _arg("shift" if shift is None else "mult", "mult and shift go together")
        m, nm = ivec(mult, "mult", cout, keep)
        s, ns = ivec(shift, "shift", cout, keep)
        if nm != ns:  # one of them per channel: the other broadcast
            m, nm = ivec([m[0]] * cout if nm == 1 else list(m), "mult", cout, keep)
            s, ns = ivec([s[0]] * cout if ns == 1 else list(s), "shift", cout, keep)
    else:
        miss = [k for k, v in (("x_scale", x_scale), ("w_scale", w_scale), ("y_scale", y_scale)) if v is None]
        if miss:
            raise _arg(miss[0], "x_scale, w_scale and y_scale go together")
        xs, ws, ys = dvec(x_scale, "x_scale", 1), dvec(w_scale, "w_scale", cout), dvec(y_scale, "y_scale", 1)
        m, s = ffi.new("int32_t[]", len(ws)), ffi.new("int32_t[]", len(ws))
        keep += [m, s]
        _check(lib.tsr_quant_requant_params(xs[0], ffi.new("double[]", ws), len(ws), ys[0], m, s))
        nm = len(ws)
    p.mult, p.shift, p.rq_count = m, s, nm
    if w_zp is not None:  # (a requantize node has no weights)
        wz, nwz = ivec(w_zp, "w_zp", cout, keep)
        p.w_zp, p.w_zp_count = wz, nwz
    p.act_min, p.act_max = clamp(ydt, p.y_zp, act_min, act_max, relu, relu6, y_scale)


def clamp(ydt, yzp, act_min, act_max, relu, relu6, y_scale):
    lo, hi = _RANGE[np.dtype(ydt).name]
    if ((act_min is not None or act_max is not None) + bool(relu) + bool(relu6)) > 1:
        raise _arg("act_min", "give only one of act_min/act_max, relu, relu6")
    if act_min is not None:
        lo = zp(act_min, ydt, "act_min")
    if act_max is not None:
        hi = zp(act_max, ydt, "act_max")
    if lo > hi:
        raise _arg("act_min", "%d is above act_max %d" % (lo, hi))
    if relu:
        lo = yzp
    if relu6:
        if not isinstance(y_scale, numbers.Real) or isinstance(y_scale, bool):
            raise _arg("relu6", "needs the output scale as a number (y_scale=R)")
        q = ffi.new("int32_t[2]")
        c = getattr(lib, _Q8[np.dtype(ydt)])
        _check(lib.tsr_quantize_bound(0.0, float(y_scale), yzp, c, q))
        _check(lib.tsr_quantize_bound(6.0, float(y_scale), yzp, c, q + 1))
        lo, hi = q[0], q[1]
    return lo, hi


def add_params(p, a, b, y, y_dtype_zp, scales=None, params=None, act_min=None, act_max=None, relu=False,
               relu6=False):
    """The add's integer parameters: scales=(a_scale, b_scale, y_scale) (TFLite ADD's Prepare) or
    params=(left_shift, mult_a, shift_a, mult_b, shift_b, mult_out, shift_out); a, b, y are
    (n, c, h, w, dtype code, numpy dtype, zp) descriptions."""
    for d, src in ((p.a, a), (p.b, b), (p.y, y)):
        d.n, d.c, d.h, d.w, d.dtype, d.zp = src[0], src[1], src[2], src[3], src[4], src[6]
    if (scales is None) == (params is None):
        raise _arg("scales", "give either scales=(a_scale, b_scale, y_scale) or params=(L, MA, SA, MB, SB, MO, SO)")
    if scales is not None:
        if not isinstance(scales, (tuple, list)) or len(scales) != 3 or \
                not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in scales):
            raise _arg("scales", "needs (a_scale, b_scale, y_scale), three numbers")
        q = ffi.new("tsr_add_quant_t *")
        _check(lib.tsr_quant_add_params(float(scales[0]), float(scales[1]), float(scales[2]), q))
        vals = (q.left_shift, q.mult_a, q.shift_a, q.mult_b, q.shift_b, q.mult_out, q.shift_out)
    else:
        if not isinstance(params, (tuple, list)) or len(params) != 7 or not all(is_int(v) for v in params):
            raise _arg("params", "needs 7 integers (left_shift, mult_a, shift_a, mult_b, shift_b, mult_out, "
                                 "shift_out)")
        if any(not -2**31 <= v < 2**31 for v in params):
            raise _arg("params", "a value outside int32")
        vals = params
    p.left_shift, p.mult_a, p.shift_a, p.mult_b, p.shift_b, p.mult_out, p.shift_out = vals
    ys = scales[2] if scales is not None else None
    p.act_min, p.act_max = clamp(y[5], y[6], act_min, act_max, relu, relu6, ys)


def check_name(name, default):
    if name is None:
        return default
    if not isinstance(name, str) or not name or len(name.encode()) > 47 or "\x00" in name:
        raise _arg("name", "needs a non-empty str of at most 47 bytes")
    return name


__all__ = ["Error"]


def bias(b, count, keep):
    """An int32 bias of count values (one per output channel) as a C pointer, or NULL for None; the
    array is kept alive in keep for the call (Graph and op share it)."""
    if b is None:
        return ffi.NULL
    b = array(b, "b", (np.int32,), ndim=1)
    if b.shape[0] != count:
        raise _arg("b", "shape %s, expected (%d,) (one per output channel)" % (tuple(b.shape), count))
    keep.append(b)
    return ffi.cast("int32_t *", ffi.from_buffer(b))
