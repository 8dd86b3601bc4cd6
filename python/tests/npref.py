"""Plain numpy references of the quantized operators, written from jit/operators.md (the normative
integer semantics) and nothing of the library: conv2d (grouped), dense, add, maxpool, avgpool, global
average pool, relu/clip, and TFLite's QuantizeMultiplier. int64 arithmetic throughout."""
import math

import numpy as np

I32 = 2**31


def wrap32(x):
    return ((np.asarray(x, np.int64) + I32) % (2 * I32)) - I32


def srdhm(a, b):
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    sat = (a == -I32) & (b == -I32)
    # floor((p + 2^30) / 2^31) with p = a*b; a*b fits int64 (|a|, |b| <= 2^31)
    p = a * b
    r = (p + (1 << 30)) >> 31
    return np.where(sat, I32 - 1, r)


def rdbpot(x, e):
    x, e = np.asarray(x, np.int64), np.asarray(e, np.int64)
    mask = (np.int64(1) << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (x < 0)
    return (x >> e) + (rem > thr)


def mbqm(x, m, s):
    m, s = np.asarray(m, np.int64), np.asarray(s, np.int64)
    return rdbpot(srdhm(wrap32(np.asarray(x, np.int64) << np.maximum(s, 0)), m), np.maximum(-s, 0))


def quantize_multiplier(r):
    """TFLite QuantizeMultiplier (operators.md "From a real scale to (M, S)")."""
    if r == 0:
        return 0, 0
    q, e = math.frexp(r)
    m = int(math.floor(q * 2**31 + 0.5))  # round half away from zero (q > 0)
    if m == 2**31:
        m, e = 2**30, e + 1
    if e < -31:
        return 0, 0
    return m, e


def requant(acc, mult, shift, y_zp, lo, hi, dtype, axis=1):
    """acc int64 [N, C, ...]; mult/shift per tensor (scalars) or per channel (along axis)."""
    shp = [1] * acc.ndim
    shp[axis] = -1
    m = np.asarray(mult, np.int64).reshape(shp if np.ndim(mult) else [1] * acc.ndim)
    s = np.asarray(shift, np.int64).reshape(shp if np.ndim(shift) else [1] * acc.ndim)
    return np.clip(mbqm(acc, m, s) + y_zp, lo, hi).astype(dtype)


def conv2d_acc(x, w, b, stride, pad, groups, x_zp, w_zp):
    """int32 accumulators [N, C_out, OH, OW] (wrap32), pad = (t, l, b, r)."""
    n, c, h, wd = x.shape
    co, cig, kh, kw = w.shape
    sh, sw = stride
    pt, pl, pb, pr = pad
    xp = np.full((n, c, h + pt + pb, wd + pl + pr), x_zp, np.int64)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    xp -= x_zp
    wz = np.asarray(w_zp, np.int64).reshape(-1, 1, 1, 1) if np.ndim(w_zp) else np.int64(w_zp)
    ww = w.astype(np.int64) - wz
    oh, ow = (h + pt + pb - kh) // sh + 1, (wd + pl + pr - kw) // sw + 1
    acc = np.zeros((n, co, oh, ow), np.int64)
    per = co // groups
    for o in range(co):
        g = o // per
        xs = xp[:, g * cig:(g + 1) * cig]
        for ky in range(kh):
            for kx in range(kw):
                win = xs[:, :, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw]
                acc[:, o] += np.einsum("nchw,c->nhw", win, ww[o, :, ky, kx])
    if b is not None:
        acc += np.asarray(b, np.int64).reshape(1, -1, 1, 1)
    return wrap32(acc)


def dense_acc(x, w, b, x_zp, w_zp):
    x2 = x.reshape(x.shape[0], -1).astype(np.int64) - x_zp
    wz = np.asarray(w_zp, np.int64).reshape(-1, 1) if np.ndim(w_zp) else np.int64(w_zp)
    acc = x2 @ (w.astype(np.int64) - wz).T
    if b is not None:
        acc += np.asarray(b, np.int64)
    return wrap32(acc)


def add(a, b, a_zp, b_zp, y_zp, params, lo, hi, dtype):
    ls, ma, sa, mb, sb, mo, so = params
    va = (a.astype(np.int64) - a_zp) << ls
    vb = (b.astype(np.int64) - b_zp) << ls
    raw = mbqm(va, ma, sa) + mbqm(vb, mb, sb)
    return np.clip(mbqm(raw, mo, so) + y_zp, lo, hi).astype(dtype)


def add_params(sa, sb, sy):
    """TFLite ADD's Prepare (operators.md "add")."""
    tm = 2 * max(sa, sb)
    ma, ea = quantize_multiplier(sa / tm)
    mb, eb = quantize_multiplier(sb / tm)
    mo, eo = quantize_multiplier(tm / ((1 << 20) * sy))
    return 20, ma, ea, mb, eb, mo, eo


def _windows(x, k, stride, pad, fill):
    n, c, h, w = x.shape
    kh, kw = k
    sh, sw = stride
    pt, pl, pb, pr = pad
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    xp = np.full((n, c, h + pt + pb, w + pl + pr), fill, np.int64)
    xp[:, :, pt:pt + h, pl:pl + w] = x
    valid = np.zeros((h + pt + pb, w + pl + pr), bool)
    valid[pt:pt + h, pl:pl + w] = True
    for oy in range(oh):
        for ox in range(ow):
            ys, xs = slice(oy * sh, oy * sh + kh), slice(ox * sw, ox * sw + kw)
            yield oy, ox, xp[:, :, ys, xs], valid[ys, xs]


def maxpool(x, k, stride, pad):
    n, c = x.shape[:2]
    out = {}
    for oy, ox, win, v in _windows(x, k, stride, pad, 0):
        out[oy, ox] = win[:, :, v].max(axis=2)  # padding never a candidate
    oh, ow = max(o[0] for o in out) + 1, max(o[1] for o in out) + 1
    y = np.zeros((n, c, oh, ow), np.int64)
    for (oy, ox), v in out.items():
        y[:, :, oy, ox] = v
    return y.astype(x.dtype)


def _round_div(s, cnt):
    # (C division truncating) ties away from zero
    q = np.where(s > 0, (s + cnt // 2), (s - cnt // 2))
    return np.sign(q) * (np.abs(q) // cnt)


def avgpool(x, k, stride, pad, x_zp, count_include_pad=False):
    n, c = x.shape[:2]
    out = {}
    for oy, ox, win, v in _windows(x, k, stride, pad, 0):
        s = win[:, :, v].sum(axis=2)
        npad = int((~v).sum())
        if count_include_pad:
            s = s + npad * x_zp
            cnt = k[0] * k[1]
        else:
            cnt = int(v.sum())
        out[oy, ox] = _round_div(s, cnt)
    oh, ow = max(o[0] for o in out) + 1, max(o[1] for o in out) + 1
    y = np.zeros((n, c, oh, ow), np.int64)
    for (oy, ox), v in out.items():
        y[:, :, oy, ox] = v
    return y.astype(x.dtype)


def global_avgpool(x):
    s = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
    return _round_div(s, x.shape[2] * x.shape[3]).astype(x.dtype)
