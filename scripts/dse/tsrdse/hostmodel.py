# The DSE's host-time model: what the operators a plan leaves on the host and its
# device <-> host round trips cost on a board's CPU, so that the throughput
# objective of an ONNX workload is frames/s = 1 / (device time + host time)
# instead of device cycles alone (a feature that moves operators onto the device,
# e.g. ACT_LUT's activation tables, costs device cycles and saves host work: with
# device time only the sweep sees the cost and not the saving).
#
# A plan's host work is read from `tessera infer --placement-json` (per host
# operator its kernel, ONNX op and "elements": its inputs' and output's elements,
# batch included; per run the "segments" and the "boundary_bytes" into and out of
# them), so it is static: the same plan gives the same host time on every run.
#
#   host_s = factor * sum(elements * ns_per_element[kernel/op]) * 1e-9     (the host operators)
#          + segments * round_trip_us * 1e-6                            (one submission + wait each)
#          + boundary_bytes * ns_per_byte * 1e-9                        (inputs in, outputs back)
#
# ns_per_element: measured on this machine (`dse.py host-calibrate`, below), the minimum over runs
# of each (kernel, op) row of `tessera infer`'s host table. factor: how much slower the board's CPU
# runs the same code (an assumption, not a measurement: no board here). round_trip_us and
# ns_per_byte are figures for the board itself. All are settable in the space file ("host").
import math

# Measured by `dse.py host-calibrate` (5 runs each of MobileNetV3-Small/-Large, EfficientNet-B0 u8
# 224 on fsim, default preset; per row the minimum of the kernels' thread CPU time over the runs;
# GLIBC_TUNABLES=glibc.malloc.perturb=1 so that the first touch of the run-time buffers is paid in
# prepare, as it is once per process on a board) on this machine: AMD EPYC (Zen 5, 2.6 GHz, KVM,
# 2 cores shared), the Release build (-O3).
# Keys are "kernel/ONNX op" as the host table prints them; "kernel" alone covers any op of that
# kernel; "*" any host operator not listed (the slowest per-element row measured, so an unknown
# kernel is not free).
NS_PER_ELEMENT = {
    "quantize/QuantizeLinear": 1.23,
    "dequantize/DequantizeLinear": 0.26,
    "float elementwise/HardSigmoid": 0.87,
    "float elementwise/Sigmoid": 2.36,
    "quantized add or mul/Mul": 1.19,
    "quantized add or mul/Add": 1.81,
    "*": 2.36,
}

# Per board (boards/NAME.json names the FPGA; its CPU is here): factor = this machine's speed over
# the board CPU's on the host kernels. From CoreMark per MHz x clock (Cortex-A9 ~2.9/MHz x 650 MHz
# ~1,900; Cortex-A53 ~3.0/MHz x 1.2 GHz ~3,600; a Zen 5 core ~6.5/MHz x 2.6 GHz ~17,000: 9x and
# 4.7x) and a margin for the float kernels, which the compiler vectorizes with AVX2 here and the
# boards run on VFP / NEON without IEEE vector float (A9) or at half the width: 15x and 6x.
# round_trip_us: one device segment's submission (doorbell, instruction stream pointers over
# AXI-Lite, cache flush and invalidate of its buffers) and its completion wake-up under Linux;
# ns_per_byte: the copy and cache maintenance of the bytes in and out (A9 ~400 MB/s, A53 ~1 GB/s).
BOARDS = {
    "pynq-z1": {"cpu": "Cortex-A9 650 MHz", "factor": 15.0, "round_trip_us": 40.0, "ns_per_byte": 2.5},
    "pynq-z2": {"cpu": "Cortex-A9 650 MHz", "factor": 15.0, "round_trip_us": 40.0, "ns_per_byte": 2.5},
    "ultra96-v2": {"cpu": "Cortex-A53 1.2 GHz", "factor": 6.0, "round_trip_us": 20.0, "ns_per_byte": 1.0},
    "zcu104": {"cpu": "Cortex-A53 1.2 GHz", "factor": 6.0, "round_trip_us": 20.0, "ns_per_byte": 1.0},
}

FIELDS = ("board", "factor", "round_trip_us", "ns_per_byte", "ns_per_element")
MAX_RATES = 64


class HostModelError(Exception):
    """A bad "host" field of a space file: the message names the field."""


def _number(v, where, positive=False):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
            or (positive and v == 0):
        raise HostModelError(f"{where} must be a {'positive' if positive else 'non-negative'} finite number")
    return float(v)


def load(doc, show):
    """The model of a space file's "host" field (None when absent: device time only, as before)."""
    if doc is None:
        return None
    if isinstance(doc, str):
        doc = {"board": doc}
    if not isinstance(doc, dict):
        raise HostModelError("host must be a board name or an object")
    for k in doc:
        if k not in FIELDS:
            raise HostModelError(f"host: unknown field {show(k)} (allowed: {', '.join(FIELDS)})")
    if "board" in doc:
        if not isinstance(doc["board"], str) or doc["board"] not in BOARDS:
            raise HostModelError(f"host.board: no host model for {show(doc['board'])} "
                                 f"(known: {', '.join(sorted(BOARDS))}; or give factor, round_trip_us, ns_per_byte)")
        out = dict(BOARDS[doc["board"]], board=doc["board"])
    else:  # this machine's own speed unless told otherwise
        out = {"cpu": "this machine", "factor": 1.0, "round_trip_us": 0.0, "ns_per_byte": 0.0}
    for k in ("factor", "round_trip_us", "ns_per_byte"):
        if k in doc:
            out[k] = _number(doc[k], f"host.{k}", positive=k == "factor")
    rates = {}
    given = doc.get("ns_per_element", {})
    if not isinstance(given, dict):
        raise HostModelError("host.ns_per_element must be an object of \"kernel/op\" -> ns")
    if len(given) > MAX_RATES:
        raise HostModelError(f"host.ns_per_element: {len(given)} entries, more than the {MAX_RATES} allowed")
    for k, v in given.items():
        if not isinstance(k, str) or not 1 <= len(k) <= 128:
            raise HostModelError(f"host.ns_per_element: key {show(k)} must be \"kernel/op\", \"kernel\" or \"*\"")
        rates[k] = _number(v, f"host.ns_per_element.{show(k)}")
    out["ns_per_element"] = rates  # the space's own rates, looked up before the measured ones
    return out


def facts(placement):
    """What the host model needs from a placement JSON (tessera infer --placement-json): elements per
    "kernel/op" of the host operators, host operators, segments, boundary bytes."""
    if "boundary_bytes" not in placement:
        raise RuntimeError("the tessera binary's placement JSON has no boundary_bytes / elements (rebuild it)")
    ops = {}
    n = 0
    for p in placement.get("placement", []):
        if p.get("side") != "host":
            continue
        key = f"{p['kernel']}/{p['op']}"
        ops[key] = ops.get(key, 0) + int(p["elements"])
        n += 1
    return {"ops": ops, "host_ops": n, "segments": int(placement["segments"]),
            "boundary_bytes": int(placement["boundary_bytes"])}


def rate(model, key):
    """ns per element of a "kernel/op": the space's rates, then the measured ones, each by
    "kernel/op", "kernel", "*" (so a space's "*" prices every host operator)."""
    for table in (model["ns_per_element"], NS_PER_ELEMENT):
        for k in (key, key.split("/")[0], "*"):
            if k in table:
                return table[k]
    return NS_PER_ELEMENT["*"]


def seconds(model, f):
    """Host seconds per run of the workload: (total, host operators part, round-trip part)."""
    ops = model["factor"] * sum(e * rate(model, k) for k, e in f["ops"].items()) * 1e-9
    trips = f["segments"] * model["round_trip_us"] * 1e-6 + f["boundary_bytes"] * model["ns_per_byte"] * 1e-9
    return ops + trips, ops, trips
