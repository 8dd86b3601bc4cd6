# Pareto fronts of the DSE: designs no other design beats on every objective.
# Objectives are (name, sense) pairs: sense +1 = larger is better (throughput),
# -1 = smaller is better (LUT, DSP, BRAM).


def dominates(a, b, objectives):
    """True if a is at least as good as b on every objective and better on one."""
    better = False
    for name, sense in objectives:
        x, y = a[name] * sense, b[name] * sense
        if x < y:
            return False
        if x > y:
            better = True
    return better


def front(rows, objectives):
    """Indices of the non-dominated rows (in input order). O(n^2): sweeps are small."""
    out = []
    for i, a in enumerate(rows):
        if not any(dominates(b, a, objectives) for j, b in enumerate(rows) if j != i):
            out.append(i)
    return out


# The DSE's objectives: throughput at the config's clock against area.
OBJECTIVES = (("throughput", +1), ("LUT", -1), ("DSP", -1), ("BRAM36", -1))
# Without synthesis: throughput against the config's own cost measures.
CONFIG_OBJECTIVES = (("throughput", +1), ("macs_per_cycle", -1), ("sram_kib", -1))
# With a workload reference (an ONNX workload's "reference"): agreement with it too, so that a
# feature that only makes the output exact (e.g. EXACT_REQUANT: same cycles, a little more area)
# is not dominated by the cheaper design it is otherwise equal to.
ACCURACY_OBJECTIVE = ("mismatches", -1)


def objectives(synth, reference):
    """The objectives of a sweep: with or without area (synth "none"), with or without a reference."""
    objs = OBJECTIVES if synth != "none" else CONFIG_OBJECTIVES
    return objs + (ACCURACY_OBJECTIVE,) if reference else objs
