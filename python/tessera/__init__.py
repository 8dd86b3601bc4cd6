"""tessera: the Tessera toolkit from Python, over the C library (libtessera.so, through cffi).

    import tessera
    cfg = tessera.config("default", LOG_BLOCK=5)       # a config as a dict
    with tessera.Device(cfg, backend="fsim") as dev:
        model = tessera.load_onnx("digits_qdq.onnx", dev)
        y = model.run(x)                                # numpy in, numpy out
        model.placement, model.report                   # lists of dicts (report.plot_roofline())
        g = tessera.Graph(dev); tessera.op.conv2d(dev, x, w, ...); tessera.dse.sweep(space)

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
from ._base import Error, Notice, _arg, _check, _s, _tensor_in, _tensor_out, _DT, _NP  # noqa: F401
from .report import Report, onnx_rows as report_rows
from .timeline import Timeline

__all__ = ["Error", "Notice", "config", "presets", "backends", "Device", "load_onnx", "Model", "asm", "verify", "run",
           "Program", "Graph", "Tensor", "Report", "Timeline", "op", "dse"]
__version__ = "0.1.0"


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
         ("EXACT_REQUANT", "exact_requant"), ("ACT_LUT", "act_lut"), ("DEPTHWISE", "depthwise")]
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
              "watchdog_cycles": "rtl", "timeline_max": "rtl"}


class Device:
    """An open device: a backend ("fsim", "rtl", "systemc", ...) with a config (preset name, JSON
    path or dict). Options: dram_size, seed, run_budget, and for rtl/systemc dram_latency,
    dram_bytes_per_cycle, dram_outstanding, threads, watchdog_cycles, timeline (a path: every run as
    Perfetto JSON, complete when the device closes; tessera.Timeline reads it) and timeline_max
    (bytes); for systemc timing_only=True (the cycles without computing the data: outputs are not
    written, as the CLI's --timing-only). A context manager; close() frees it (and every model
    prepared on it stops working)."""

    def __init__(self, config="default", backend="fsim", **options):
        self._dev = None
        self._lock = threading.Lock()
        if not isinstance(backend, str):
            raise _arg("backend", "a backend name (%s), not %s" % (", ".join(backends()), type(backend).__name__))
        self._cfg = _cfg_struct(config)
        opts = ffi.new("tsr_device_opts_t *")
        self._keep = []  # C strings the options point to, alive as long as the device
        self.timing_only = False
        for k, v in options.items():
            if k == "timing_only":
                if not isinstance(v, bool):
                    raise _arg(k, "needs True or False")
                opts.rtl.timing_only = int(v)
                self.timing_only = v
                continue
            if k == "timeline":
                if not isinstance(v, (str, os.PathLike)) or not os.fspath(v):
                    raise _arg(k, "needs a file path")
                self._keep.append(ffi.new("char[]", os.fsencode(v)))
                opts.rtl.timeline_path = self._keep[-1]
                continue
            if k not in _DRAM_OPTS:
                raise _arg(k, "not a device option (%s)" % ", ".join(sorted(list(_DRAM_OPTS) +
                                                                            ["timeline", "timing_only"])))
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


# ---------------------------------------------------------------- ONNX models

class Model:
    """An ONNX model imported and prepared on a device (tessera.load_onnx)."""

    def __init__(self, path, device, batch, _image=None, place=None):
        self._m = None
        self._dev = device
        self.path = str(path)
        self._image = _image
        self._batch = None
        self._opts = _place_opts(place)
        if not isinstance(device, Device):
            raise _arg("device", "needs a tessera.Device, not %s" % type(device).__name__)
        device._handle("device")
        if not isinstance(path, (str, os.PathLike)):
            raise _arg("path", "needs a file path, not %s" % type(path).__name__)
        if self._image is None:
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
        _check(lib.tsr_onnx_load_buffer_opts(self._image, len(self._image), self.path.encode(), batch, self._opts,
                                             out))
        m = ffi.gc(out[0], lib.tsr_onnx_free)
        lock = self._dev._busy("device")
        try:
            _check(lib.tsr_onnx_prepare(m, self._dev._cfg, self._dev._dev, 0))
        finally:
            lock.release()
        self._release()
        self._m, self._batch = m, batch
        self._placement = json.loads(_capture(lib.tsr_py_onnx_placement_json, m))

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
        first graph output as a new array. x is read in place (C-contiguous, the model's dtype). On a
        timing_only device the data is not computed: None (the report has the cycles)."""
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
        y = _tensor_out(out)
        # timing-only (systemc): the cycles are the full model's, the data is never computed
        return None if self._dev.timing_only else y

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
        """The per-layer table of the last run (`tessera infer`'s, from the library's rows: names in
        full, figures unrounded): a tessera.report.Report, a list of dicts with segment, index, node
        (the ONNX node index of Model.placement), name, layer, op, shape, macs, cycles, util, bound,
        ratio, limit, moved, compulsory, wall_ms, plan_ms, upload_ms, jit, solo; .to_dataframe(),
        .plot_roofline(), and an HTML table in notebooks."""
        return Report(*report_rows(self._handle()))

    def timeline(self, x, path=None, backend="systemc", **options):
        """Run x once on a timed backend (a device of its own with this device's config: "systemc" or
        "rtl") with its timeline on, and return it read back (tessera.Timeline: .runs, .lanes,
        .plot() for a Gantt of the stages). path: where the Perfetto JSON goes (open it in
        ui.perfetto.dev), default a temporary file removed after reading. options: the Device's
        (dram_latency, timeline_max, ...)."""
        self._handle()
        if "timeline" in options:
            raise _arg("timeline", "give the file as path=")
        if backend not in ("systemc", "rtl"):  # the timed backends are the ones that write timelines
            raise _arg("backend", "%r writes no timeline: systemc or rtl" % (backend,))
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise _arg("path", "needs a file path, not %s" % type(path).__name__)
        import tempfile
        tmp = None
        if path is None:
            fd, tmp = tempfile.mkstemp(prefix="tessera-timeline-", suffix=".json")
            os.close(fd)
        try:
            with Device(self._dev.config, backend=backend, timeline=path or tmp, **options) as d:
                m = Model(self.path, d, self._batch, _image=self._image)
                m.run(x)
                layers = [r["name"] for r in m.report]
            return Timeline(path or tmp, layers)
        finally:
            if tmp:
                os.unlink(tmp)

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


def _place_opts(place):
    """place (None, "KIND=device|host[,...]" or {KIND: "device"|"host"}) as the importer's options,
    parsed by the same function as `tessera infer --place`."""
    opts = ffi.new("tsr_onnx_opts_t *")  # zeroed: every kind at its default
    if place is None:
        return opts
    if isinstance(place, dict):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in place.items()):
            raise _arg("place", "needs str kinds and values")
        place = ",".join("%s=%s" % kv for kv in place.items())
    if not isinstance(place, str) or not place:
        raise _arg("place", "needs \"KIND=device|host[,...]\" or a dict of them")
    rc = lib.tsr_onnx_parse_place(place.encode(), opts)
    if rc != lib.TSR_OK:
        msg = " ".join(_s(lib.tsr_errmsg()).split())
        lib.tsr_err_clear()
        raise Error("place: %s" % re.sub(r"^--place:? ?", "", msg), rc)  # the CLI's option name off
    return opts


def load_onnx(path, device, batch=1, place=None):
    """Import a quantized ONNX model and prepare it on device; batch is the size given to a
    symbolic first input dimension (run() re-imports for another batch size). place chooses where
    the ops with both a device and a host form run, as `tessera infer --place`: "KIND=device|host"
    comma-separated or a dict (KIND: concat, attn-matmul, shuffle, softmax, bias)."""
    return Model(path, device, batch, place=place)


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


# The graph builder (after the names above: it imports them). tessera.op and tessera.dse load on
# first use (PEP 562): the DSE's subprocess and tempfile would add to every import.
from .graph import Graph, Tensor  # noqa: E402


def __getattr__(name):
    if name in ("op", "dse"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'tessera' has no attribute %r" % (name,))
