# Board presets for the DSE: read boards/*.json (the one source of board
# budgets, see boards/README.md) and decide whether a synthesized design fits.
import json
import os

# Families whose fit the DSE can judge from scripts/synth.sh (synth_xilinx, 7-series
# cells). UltraScale+ boards are judged from the same netlist's LUT/FF/RAMB/DSP48 counts:
# an estimate (synth_xilinx -family xcup maps to the same resource classes).
SYNTH_FAMILIES = ("xc7", "xcup")
_BITS = {"BRAM36": 36 * 1024, "URAM": 288 * 1024, "EBR": 4 * 1024, "SPRAM": 256 * 1024}


def names(root):
    d = os.path.join(root, "boards")
    return sorted(f[:-5] for f in os.listdir(d) if f.endswith(".json"))


def load(root, name):
    with open(os.path.join(root, "boards", name + ".json"), encoding="utf-8") as f:
        b = json.load(f)
    b.setdefault("limits", {})
    return b


def usable(board, res):
    """The usable amount of a resource class: the budget times its limit share."""
    total = board["resources"].get(res)
    if total is None:
        return None
    return total * board["limits"].get(res, 1.0)


def ram_bits(board):
    """An upper bound of the on-chip RAM bits: every RAM primitive, and on Xilinx every
    LUT as 64-bit distributed RAM (used to tell a board that nothing can fit)."""
    bits = sum(board["resources"].get(k, 0) * v for k, v in _BITS.items())
    if board["family"] in SYNTH_FAMILIES:
        bits += board["resources"].get("LUT", 0) * 64
    return int(bits)


def area_classes(area):
    """Synthesis counts by board resource class (a RAMB18 is half a RAMB36)."""
    return {"LUT": area["LUT"] + area.get("LUTRAM", 0), "FF": area["FF"],
            "BRAM36": area["BRAM36"] + 0.5 * area["BRAM18"], "DSP": area["DSP"]}


def fit(board, area, clock_mhz=None):
    """(fits, worst class, its use as a share of the usable amount) for a synthesized area.
    A clock above the board preset's accelerator clock does not fit either: the open
    xc7 flow has no timing analysis, so the preset's clock is the one we trust."""
    if clock_mhz is not None and clock_mhz > board.get("clock_mhz", clock_mhz):
        return False, "clock", clock_mhz / board["clock_mhz"]
    use = area_classes(area)
    worst, share = None, 0.0
    for res, n in use.items():
        cap = usable(board, res)
        if cap is None:
            continue
        s = n / cap if cap else float("inf")
        if s > share:
            worst, share = res, s
    return share <= 1.0, worst, share


def fits_budget(budget, area):
    use = area_classes(area)
    return all(use[k] <= v for k, v in budget.items())
