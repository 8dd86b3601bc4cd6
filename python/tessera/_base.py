"""The package's plumbing: the extension, tessera.Error, argument checks and numpy <-> tsr_tensor_t."""
import numpy as np

from ._tessera_c import ffi, lib


class Error(Exception):
    """A Tessera error: the C library's message (one line); .code is its code (negative), .name e.g. 'EVERIFY'."""

    def __init__(self, message, code=-1):
        super().__init__(message)
        self.code = code
        self.name = ffi.string(lib.tsr_errname(code)).decode() if code < 0 else ""


class Notice(UserWarning):
    """Something the library tells the user that is not an error (a timeline cut at its size limit, a
    kernel cache it cannot use): issued with warnings.warn, never printed to stderr."""


@ffi.def_extern()
def _tsr_notice_cb(ctx, line):
    import warnings
    warnings.warn(ffi.string(line).decode("utf-8", "replace"), Notice, stacklevel=2)


# Route the library's notices here for the life of the process (its default prints to stderr).
lib.tsr_set_notice_handler(lib._tsr_notice_cb, ffi.NULL)


def _s(p):
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""


def _check(rc):
    """Raise Error with the thread's last C message when rc is an error code."""
    if rc != lib.TSR_OK:
        msg = " ".join(_s(lib.tsr_errmsg()).split()) or "error %d" % rc
        lib.tsr_err_clear()
        raise Error(msg, rc)


def _arg(name, why):
    return Error("%s: %s" % (name, why), lib.TSR_EINVAL)


# ---------------------------------------------------------------- arrays

_DT = {np.dtype(np.int8): lib.TSR_DT_INT8, np.dtype(np.uint8): lib.TSR_DT_UINT8,
       np.dtype(np.int16): lib.TSR_DT_INT16, np.dtype(np.int32): lib.TSR_DT_INT32,
       np.dtype(np.float32): lib.TSR_DT_FLOAT32, np.dtype(np.int64): lib.TSR_DT_INT64}
_NP = {v: k for k, v in _DT.items()}


def _tensor_in(x, name, dtype=None, shape=None):
    """A tsr_tensor_t over x's own memory (no copy); x must stay alive while it is used."""
    if not isinstance(x, np.ndarray):
        raise _arg(name, "needs a numpy array, not %s" % type(x).__name__)
    if x.dtype not in _DT or not x.dtype.isnative:
        raise _arg(name, "dtype %s not supported (int8, uint8, int16, int32, int64, float32, native byte order)"
                   % x.dtype)
    if dtype is not None and x.dtype != dtype:
        raise _arg(name, "dtype %s, the model wants %s" % (x.dtype, np.dtype(dtype)))
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise _arg(name, "shape %s, the model wants %s" % (tuple(x.shape), tuple(shape)))
    if x.ndim > 8:
        raise _arg(name, "%d dimensions, at most 8" % x.ndim)
    if not x.flags.c_contiguous:
        raise _arg(name, "not C-contiguous (use np.ascontiguousarray)")
    t = ffi.new("tsr_tensor_t *")
    t.dtype, t.ndim, t.nbytes = _DT[x.dtype], x.ndim, x.nbytes
    for i, s in enumerate(x.shape):
        t.shape[i] = s
    t.data = ffi.from_buffer(x) if x.nbytes else ffi.NULL
    return t


def _tensor_out(t):
    """A numpy array taking over t's malloc'd data (freed with the array; no copy)."""
    if t.dtype not in _NP:
        lib.tsr_tensor_free(t)
        raise Error("result: dtype code %d has no numpy type" % t.dtype)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.nbytes == 0 or t.data == ffi.NULL:
        lib.tsr_tensor_free(t)
        return np.zeros(shape, _NP[t.dtype])
    owner = ffi.gc(ffi.cast("char *", t.data), lib.free, size=t.nbytes)
    t.data = ffi.NULL  # the array owns it now
    return np.frombuffer(ffi.buffer(owner, t.nbytes), dtype=_NP[t.dtype]).reshape(shape)
