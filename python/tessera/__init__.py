"""tessera: the Tessera toolkit from Python, over the C library (libtessera.so, through cffi).

    import tessera
    cfg = tessera.config("default", LOG_BLOCK=5)       # a config as a dict
    with tessera.Device(cfg, backend="fsim") as dev:
        model = tessera.load_onnx("digits_qdq.onnx", dev)
        y = model.run(x)                                # numpy in, numpy out
        model.placement, model.report                   # lists of dicts (report: DataFrame with pandas)

Every C error becomes a tessera.Error carrying the library's one-line message; the library never
prints. Calls into C release the GIL (cffi's default), so devices can run from several threads;
a device runs one thing at a time (a second run while one is in flight raises). See
docs/guide/python.md.
"""
import json
import os
import re
import threading
import weakref

import numpy as np

from ._tessera_c import ffi, lib

__all__ = ["Error", "config", "presets", "backends", "Device", "load_onnx", "Model", "asm", "verify", "run",
           "Program"]
__version__ = "0.1.0"


class Error(Exception):
    """A Tessera error: the C library's message (one line); .code is its code (negative), .name e.g. 'EVERIFY'."""

    def __init__(self, message, code=-1):
        super().__init__(message)
        self.code = code
        self.name = ffi.string(lib.tsr_errname(code)).decode() if code < 0 else ""


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


# ---------------------------------------------------------------- configs

# The keys a config is written with (tsr_config.h), in the struct's order.
_KEYS = [("TARGET", "target"), ("HW_VER", "hw_ver"), ("LOG_INP_WIDTH", "log_inp_width"),
         ("LOG_WGT_WIDTH", "log_wgt_width"), ("LOG_ACC_WIDTH", "log_acc_width"), ("LOG_BATCH", "log_batch"),
         ("LOG_BLOCK_IN", "log_block_in"), ("LOG_BLOCK_OUT", "log_block_out"),
         ("LOG_UOP_BUFF_SIZE", "log_uop_buff_size"), ("LOG_INP_BUFF_SIZE", "log_inp_buff_size"),
         ("LOG_WGT_BUFF_SIZE", "log_wgt_buff_size"), ("LOG_ACC_BUFF_SIZE", "log_acc_buff_size"),
         ("DRAM_BUS_WIDTH", "dram_bus_width"), ("CLOCK_MHZ", "clock_mhz"), ("CMD_QUEUE_DEPTH", "cmd_queue_depth"),
         ("DEP_QUEUE_DEPTH", "dep_queue_depth"), ("DSP_PACK", "dsp_pack"), ("OUT_BUFF_LUTRAM", "out_buff_lutram"),
         ("ACC_SINGLE_COPY", "acc_single_copy"), ("SERIAL_CORE", "serial_core"),
         ("EXACT_REQUANT", "exact_requant"), ("ACT_LUT", "act_lut")]
# Derived quantities, reported in lower case (read-only: a dict passed back uses the upper-case keys).
_DERIVED = ["inp_width", "wgt_width", "acc_width", "out_width", "batch", "block_in", "block_out", "uop_bytes",
            "inp_bytes", "wgt_bytes", "acc_bytes", "acc8_bytes", "out_bytes", "uop_depth", "inp_depth",
            "wgt_depth", "acc_depth", "out_depth", "uop_idx_bits", "inp_idx_bits", "wgt_idx_bits", "acc_idx_bits",
            "uop_dst_bits", "uop_src_bits", "uop_wgt_bits", "sram_base_bits", "out_buff_size", "macs_per_op"]


def presets():
    """Names of the built-in config presets."""
    p, out = lib.tsr_config_preset_names(), []
    while p[len(out)] != ffi.NULL:
        out.append(_s(p[len(out)]))
    return out


def backends():
    """Names of the backends this library was built with."""
    p, out = lib.tsr_backend_names(), []
    while p[len(out)] != ffi.NULL:
        out.append(_s(p[len(out)]))
    return out


def _to_dict(c):
    d = {k: (_s(getattr(c, f)) if f in ("target", "hw_ver") else int(getattr(c, f))) for k, f in _KEYS}
    d.update({f: int(getattr(c, f)) for f in _DERIVED})
    return d


def _cfg_struct(cfg):
    """A tsr_config_t* from a preset name, a JSON file path or a config dict."""
    c = ffi.new("tsr_config_t *")
    if isinstance(cfg, str):
        _check(lib.tsr_config_load(cfg.encode(), c))
    elif isinstance(cfg, dict):
        keys = {k: v for k, v in cfg.items() if isinstance(k, str) and k.isupper()}
        _check(lib.tsr_config_parse(json.dumps(keys).encode(), b"<config dict>", c))
    else:
        raise _arg("config", "a preset name, a JSON file path or a dict from tessera.config(), not %s"
                   % type(cfg).__name__)
    return c


def config(name_or_path="default", **overrides):
    """The configuration as a dict: the keys as written (upper case, VTA's names) and the derived
    quantities (lower case). Keyword arguments override keys: config("default", LOG_BLOCK=5)."""
    if not isinstance(name_or_path, (str, dict)):
        raise _arg("name_or_path", "a preset name or a JSON file path, not %s" % type(name_or_path).__name__)
    c = _cfg_struct(name_or_path)
    if not overrides:
        return _to_dict(c)
    base = {k: v for k, v in _to_dict(c).items() if k.isupper()}
    # LOG_BLOCK sets both block sizes: the override replaces whichever form the base used.
    if "LOG_BLOCK" in overrides:
        base.pop("LOG_BLOCK_IN"), base.pop("LOG_BLOCK_OUT")
    base.update(overrides)
    if "LOG_BLOCK" not in overrides and ("LOG_BLOCK_IN" in overrides or "LOG_BLOCK_OUT" in overrides):
        base.pop("LOG_BLOCK", None)
    name = "%s with %s" % (name_or_path if isinstance(name_or_path, str) else "<config dict>",
                           ", ".join("%s=%s" % kv for kv in overrides.items()))
    c2 = ffi.new("tsr_config_t *")
    _check(lib.tsr_config_parse(json.dumps(base).encode(), name.encode(), c2))
    return _to_dict(c2)


# ---------------------------------------------------------------- devices

_DRAM_OPTS = {"dram_size": None, "seed": None, "run_budget": None, "dram_latency": "rtl",
              "dram_bytes_per_cycle": "rtl", "dram_outstanding": "rtl", "threads": "rtl",
              "watchdog_cycles": "rtl"}


class Device:
    """An open device: a backend ("fsim", "rtl", "systemc", ...) with a config (preset name, JSON
    path or dict). Options: dram_size, seed, run_budget, and for rtl/systemc dram_latency,
    dram_bytes_per_cycle, dram_outstanding, threads, watchdog_cycles. A context manager; close()
    frees it (and every model prepared on it stops working)."""

    def __init__(self, config="default", backend="fsim", **options):
        self._dev = None
        self._lock = threading.Lock()
        if not isinstance(backend, str):
            raise _arg("backend", "a backend name (%s), not %s" % (", ".join(backends()), type(backend).__name__))
        self._cfg = _cfg_struct(config)
        opts = ffi.new("tsr_device_opts_t *")
        for k, v in options.items():
            if k not in _DRAM_OPTS:
                raise _arg(k, "not a device option (%s)" % ", ".join(sorted(_DRAM_OPTS)))
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                raise _arg(k, "needs a number >= 0")
            try:
                setattr(opts.rtl if _DRAM_OPTS[k] else opts, k, v)
            except (TypeError, OverflowError):
                raise _arg(k, "out of range: %r" % (v,)) from None
        out = ffi.new("tsr_device_t **")
        _check(lib.tsr_device_open(backend.encode(), self._cfg, opts, out))
        self._dev = out[0]
        self.backend = backend
        self.config = _to_dict(self._cfg)
        # The models prepared here, freed by close() before the device (a model outliving its
        # device must not touch it); weak, so that a dropped model is freed at once.
        self._models = weakref.WeakSet()

    def _handle(self, name="device"):
        if self._dev is None:
            raise Error("%s: the device is closed" % name, lib.TSR_EINVAL)
        return self._dev

    def _busy(self, name="device"):
        """Take the device for one call; refuse (no wait) while another thread runs on it."""
        self._handle(name)
        if not self._lock.acquire(blocking=False):
            raise Error("%s: busy: a run is in flight on this device (one at a time)" % name, lib.TSR_EINVAL)
        if self._dev is None:
            self._lock.release()
            raise Error("%s: the device is closed" % name, lib.TSR_EINVAL)
        return self._lock

    def close(self):
        """Close the device (models prepared on it are freed first). Safe to call twice."""
        if self._dev is None:
            return
        with self._lock:
            for m in list(self._models):
                m._release()
            self._models = weakref.WeakSet()
            lib.tsr_device_close(self._dev)
            self._dev = None

    @property
    def closed(self):
        return self._dev is None

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<tessera.Device %s%s>" % (self.backend if self._dev else "?", " closed" if self._dev is None else "")


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


# ---------------------------------------------------------------- ONNX models

_SEG = re.compile(r"^device segment (\d+)")
_REPORT_COLS = ["layer", "op", "shape", "macs", "cycles", "util", "bound", "ratio", "limit", "moved",
                "compulsory", "plan_ms", "jit"]


def _num(v):
    if v == "-":
        return None
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def _parse_report(text):
    rows, seg = [], -1
    for line in text.splitlines():
        m = _SEG.match(line)
        if m:
            seg = int(m.group(1))
            continue
        tok = line.split()
        if len(tok) < 14 or not tok[0].isdigit() or len(tok[0]) > 3:
            continue
        mid = line[4:61]  # the layer (18), op (10) and shape (26) columns, fixed width
        right = tok[-10:]
        row = {"segment": seg, "index": int(tok[0]), "layer": mid[0:18].strip(), "op": mid[19:29].strip(),
               "shape": mid[30:56].strip()}
        row.update({k: _num(v) for k, v in zip(_REPORT_COLS[3:], right)})
        rows.append(row)
    return rows


def _table(rows):
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame(rows)


class Model:
    """An ONNX model imported and prepared on a device (tessera.load_onnx)."""

    def __init__(self, path, device, batch):
        self._m = None
        self._dev = device
        self.path = str(path)
        self._image = None
        self._batch = None
        if not isinstance(device, Device):
            raise _arg("device", "needs a tessera.Device, not %s" % type(device).__name__)
        device._handle("device")
        if not isinstance(path, (str, os.PathLike)):
            raise _arg("path", "needs a file path, not %s" % type(path).__name__)
        try:
            with open(path, "rb") as f:
                self._image = f.read(lib_max_file() + 1)
        except OSError as e:
            raise Error("%s: %s" % (path, e.strerror or e), lib.TSR_EIO) from None
        if len(self._image) > lib_max_file():
            raise Error("%s: larger than %d bytes" % (path, lib_max_file()), lib.TSR_EINVAL)
        self._load(batch)
        device._models.add(self)

    def _load(self, batch):
        """Import the file image for this batch size and prepare it on the device."""
        if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 65536:
            raise _arg("batch", "needs an int in 1..65536")
        out = ffi.new("tsr_onnx_t **")
        _check(lib.tsr_onnx_load_buffer(self._image, len(self._image), self.path.encode(), batch, out))
        m = ffi.gc(out[0], lib.tsr_onnx_free)
        lock = self._dev._busy("device")
        try:
            _check(lib.tsr_onnx_prepare(m, self._dev._cfg, self._dev._dev, 0))
        finally:
            lock.release()
        self._release()
        self._m, self._batch = m, batch
        self._placement = json.loads(_capture(lib.tsr_py_onnx_placement_json, m))
        self._report = None

    def _release(self):
        if self._m is not None:
            m, self._m = self._m, None
            ffi.release(m)  # tsr_onnx_free now, while the device is open

    def _handle(self):
        if self._m is None:
            raise Error("model: its device is closed", lib.TSR_EINVAL)
        return self._m

    def run(self, x):
        """Run the model on x (its first dimension is the batch when the model's is symbolic); the
        first graph output as a new array. x is read in place (C-contiguous, the model's dtype)."""
        self._handle()
        self._dev._handle("device")
        if isinstance(x, np.ndarray) and x.ndim >= 1 and x.shape[0] != self._batch and 1 <= x.shape[0] <= 65536:
            self._load(int(x.shape[0]))  # a new batch size: import again for it
        t = _tensor_in(x, "x")
        out = ffi.new("tsr_tensor_t *")
        lock = self._dev._busy("device")
        try:
            rc = lib.tsr_onnx_run(self._m, t, out)
        finally:
            lock.release()
        try:
            _check(rc)
        except Error as e:
            # The library checks x against the model's input ('input "NAME" must be DTYPE [SHAPE]');
            # there is no accessor for that declaration yet, so its message is given the argument's name.
            if e.code == lib.TSR_EINVAL and re.search(r'input "[^"]*" must be', str(e)):
                raise Error("x: %s" % e, e.code) from None
            raise
        self._report = None
        return _tensor_out(out)

    def value(self, name):
        """After a run: the value called name (a host tensor or a device segment's output)."""
        if not isinstance(name, str):
            raise _arg("name", "needs a value name (str)")
        out = ffi.new("tsr_tensor_t *")
        _check(lib.tsr_onnx_read_value(self._handle(), name.encode(), out))
        return _tensor_out(out)

    @property
    def placement(self):
        """Where each ONNX node runs, in graph order (`tessera infer --placement-json`): dicts
        {index, name (in full), op, side ("device", "host", "folded", "alias", "view", "constant"),
        segment (-1 off the device), kernel, macs}."""
        self._handle()
        return [dict(p) for p in self._placement["placement"]]

    @property
    def device_ops(self):
        return lib.tsr_onnx_device_ops(self._handle())

    @property
    def host_ops(self):
        return lib.tsr_onnx_host_ops(self._handle())

    @property
    def report(self):
        """The per-layer table of the last run (`tessera infer`'s): one row per device layer with
        segment, index, layer, op, shape, macs, cycles, util, bound, ratio, limit, moved,
        compulsory, plan_ms, jit; a pandas DataFrame when pandas is installed, else a list of dicts."""
        if self._report is None:
            self._report = _parse_report(_capture(lib.tsr_py_onnx_report, self._handle()))
        return _table([dict(r) for r in self._report])

    @property
    def report_text(self):
        return _capture(lib.tsr_py_onnx_report, self._handle())

    @property
    def placement_text(self):
        return _capture(lib.tsr_py_onnx_placement, self._handle())

    def __repr__(self):
        return "<tessera.Model %s: %s>" % (self.path, "closed" if self._m is None else "batch %d" % self._batch)


def lib_max_file():
    return 256 << 20  # TSR_ONNX_MAX_FILE (onnx/tsr_onnx.h)


def _capture(fn, m):
    p = fn(m)
    if p == ffi.NULL:
        raise Error("out of memory", lib.TSR_ENOMEM)
    try:
        return ffi.string(p).decode("utf-8", "replace")
    finally:
        lib.free(p)


def load_onnx(path, device, batch=1):
    """Import a quantized ONNX model and prepare it on device; batch is the size given to a
    symbolic first input dimension (run() re-imports for another batch size)."""
    return Model(path, device, batch)


# ---------------------------------------------------------------- programs

class Program:
    """An assembled instruction stream with its declared buffers (tessera.asm)."""

    def __init__(self, prog, cfg):
        self._p = prog
        self._cfg = cfg

    def __len__(self):
        return self._p.ninsns

    @property
    def buffers(self):
        """The declared buffers: dicts {name, addr, size, init, output}."""
        inits = {0: "zero", 1: "random", 2: "file", 3: "uops"}
        return [{"name": _s(b.name), "addr": b.addr, "size": b.size, "init": inits.get(b.init, "?"),
                 "output": bool(b.is_output)} for b in (self._p.bufs[i] for i in range(self._p.nbufs))]

    def _regions(self):
        r = ffi.new("tsr_region_t[]", max(1, self._p.nbufs))
        for i in range(self._p.nbufs):
            r[i].addr, r[i].size, r[i].name = self._p.bufs[i].addr, self._p.bufs[i].size, self._p.bufs[i].name
        return r


def asm(text, config="default", name="<asm>"):
    """Assemble Tessera assembly text for a config; a Program."""
    if not isinstance(text, str):
        raise _arg("text", "needs assembly text (str), not %s" % type(text).__name__)
    c = _cfg_struct(config)
    p = ffi.new("tsr_program_t *")
    _check(lib.tsr_asm_parse(c, text.encode(), str(name).encode(), p))
    return Program(ffi.gc(p, lib.tsr_program_free), c)


def verify(program):
    """Run the static verifier on a Program (every DRAM access inside a declared buffer); raises
    Error (EVERIFY, EDEADLOCK) naming the instruction, else returns None."""
    if not isinstance(program, Program):
        raise _arg("program", "needs a tessera.Program (tessera.asm), not %s" % type(program).__name__)
    regions = program._regions()
    o = ffi.new("tsr_verify_opts_t *")
    o.regions, o.nregions, o.check_dram = regions, program._p.nbufs, 1
    _check(lib.tsr_verify(program._cfg, program._p.insns, program._p.ninsns, o))


def run(program, device, inputs=None, timeout_ms=-1):
    """Run a Program on device as `tessera run` does: every declared buffer allocated and filled
    (zero, random, uops; inputs={name: bytes-like} for the others or to override), the stream
    submitted (verified by the driver) and waited for; returns {name: bytes} of the .output buffers."""
    if not isinstance(program, Program):
        raise _arg("program", "needs a tessera.Program (tessera.asm), not %s" % type(program).__name__)
    if not isinstance(device, Device):
        raise _arg("device", "needs a tessera.Device, not %s" % type(device).__name__)
    inputs = dict(inputs or {})
    p = program._p
    names = {_s(p.bufs[i].name) for i in range(p.nbufs)}
    for k in inputs:
        if k not in names:
            raise _arg("inputs", "no buffer named %r in the program" % (k,))
    lock = device._busy("device")
    dev = device._dev
    allocated = []
    try:
        ub = device.config["uop_bytes"]
        for i in range(p.nbufs):
            b = p.bufs[i]
            nm = _s(b.name)
            _check(lib.tsr_mem_alloc_at(dev, b.addr, b.size))
            allocated.append(b.addr)
            data = bytearray(b.size)
            if nm in inputs:
                src = memoryview(inputs[nm]).cast("B")
                if len(src) > b.size:
                    raise _arg("inputs", "%s: %d bytes, the buffer holds %d" % (nm, len(src), b.size))
                data[:len(src)] = src
            elif b.init == 1:
                lib.tsr_asm_random_fill(b.seed, ffi.from_buffer(data), b.size)
            elif b.init == 3:
                for k in range(p.bufs[i].nuops):
                    data[k * ub:(k + 1) * ub] = int(b.uops[k]).to_bytes(8, "little")[:ub]
            elif b.init == 2:
                raise _arg("inputs", "%s is initialised from a file: give its bytes in inputs" % nm)
            _check(lib.tsr_mem_write(dev, b.addr, ffi.from_buffer(data), b.size))
        _check(lib.tsr_submit(dev, p.insns, p.ninsns))
        _check(lib.tsr_wait(dev, int(timeout_ms)))
        out = {}
        for i in range(p.nbufs):
            b = p.bufs[i]
            if b.is_output:
                data = bytearray(b.size)
                _check(lib.tsr_mem_read(dev, b.addr, ffi.from_buffer(data), b.size))
                out[_s(b.name)] = bytes(data)
        return out
    finally:
        for a in allocated:
            lib.tsr_mem_free(dev, a)
        lock.release()
