#!/usr/bin/env bash
# The open iCE40 flow, config to bitstream: `tessera config emit-sv` ->
# yosys synth_ice40 -dsp (without ice40_dsp) of tsr_top (scripts/fpga/ice40_synth.sh, the netlist
# the gate-level model simulates) -> the board wrapper hw/fpga/ice40 around
# that netlist (device memory in SPRAM, host access over the USB UART) ->
# nextpnr-ice40 -> icepack -> icetime. Prints utilisation against the
# board file, Fmax (nextpnr and icetime) and the bitstream size. Stops with
# "does not fit" before placement when the core's cells exceed the board.
# Usage: scripts/fpga/ice40.sh TESSERA_BIN CONFIG [BOARD_JSON] [WORKDIR]
#   CONFIG: preset name or JSON (configs/ice40.json, the smallest preset, does
#   not fit yet: see hw/fpga/ice40/README.md);
#   BOARD_JSON: default boards/ice40-up5k.json (the wrapper needs SPRAM).
# Writes WORKDIR/tsr_ice40.bin; program an iCEBreaker with `iceprog tsr_ice40.bin`.
set -euo pipefail
cli=$1; cfg=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
board=${3:-$root/boards/ice40-up5k.json}
work=${4:-$(mktemp -d)}
mkdir -p "$work"
py=/usr/bin/python3
# Board data (the one source): part, clock, resource budget.
read -r part clock_mhz family <<<"$("$py" -c 'import json,sys; b=json.load(open(sys.argv[1])); print(b["part"], b["clock_mhz"], b["family"])' "$board")"
[ "$family" = ice40 ] || { echo "ice40.sh: $board is not an iCE40 board (family $family)" >&2; exit 1; }
dev=${part%-*}; pkg=${part#*-}

t0=$(date +%s)
"$cli" config emit-sv "$cfg" -o "$work/tsr_pkg.sv"
bus=$(sed -n 's/.*localparam int DRAM_BUS_WIDTH = \([0-9]*\);.*/\1/p' "$work/tsr_pkg.sv")
[ "$bus" = 32 ] || { echo "ice40.sh: the board wrapper's memory is 32 bits wide; $cfg has DRAM_BUS_WIDTH = $bus" >&2; exit 1; }
# A core netlist already in WORKDIR/core is reused (a second run, or a
# hand-made netlist to check the rest of the flow).
top=tsr_top
[ -f "$work/core/${top}_ice40.v" ] || "$root/scripts/fpga/ice40_synth.sh" "$work/tsr_pkg.sv" "$work/core"
t1=$(date +%s)
# The core's cells against the board before placing anything: a logic cell
# holds one LUT4 and one flip-flop, so max(LUT4, FF) is a lower bound on LCs.
"$py" - "$board" "$work/core/stat.txt" "$cfg" "$top" <<'PY'
import json, re, sys
b = json.load(open(sys.argv[1]))
cells = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(SB_\w+)\s+(\d+)$", open(sys.argv[2]).read(), re.M)}
lut = cells.get("SB_LUT4", 0)
ff = sum(n for c, n in cells.items() if c.startswith("SB_DFF"))
need = {"LC": max(lut, ff), "EBR": cells.get("SB_RAM40_4K", 0), "DSP": cells.get("SB_MAC16", 0)}
res = b["resources"]
print(f"core {sys.argv[4]} ({sys.argv[3]}) after synth_ice40: SB_LUT4 {lut}, flip-flops {ff}, SB_CARRY {cells.get('SB_CARRY', 0)}, "
      f"SB_RAM40_4K {need['EBR']}, SB_MAC16 {need['DSP']}")
over = []
for k, n in need.items():
    if k in res:
        print(f"  {k:<6} >= {n:>6} of {res[k]:>6} ({100.0 * n / res[k]:.0f}%)")
        if n > res[k]:
            over.append(f"{k} {n} > {res[k]}")
    elif n:
        over.append(f"{k} {n} (the board has none)")
if over:
    sys.exit(f"ice40 flow: the core does not fit {b['name']}: {'; '.join(over)}")
PY
spram=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["resources"].get("SPRAM", 0))' "$board")
[ "$spram" -ge 4 ] || { echo "ice40.sh: the board wrapper keeps device memory in 4 SPRAMs; $board has $spram (an UP5K has 4)" >&2; exit 1; }
# The wrapper around the already-mapped core: synth_ice40 keeps its SB_* cells.
# No -dsp: the wrapper has no multiplier, and -dsp would run ice40_dsp (see
# ice40_synth.sh) over the core's SB_MAC16 cells again.
clk_hz=$((clock_mhz * 1000000))
yosys -q -l "$work/top.log" -p "read_verilog -sv $work/tsr_pkg.sv $root/hw/fpga/ice40/tsr_*.sv
  read_verilog $work/core/${top}_ice40.v
  chparam -set ClkHz $clk_hz tsr_ice40_top
  synth_ice40 -top tsr_ice40_top -json $work/tsr_ice40.json" >/dev/null 2>"$work/top.stderr" || {
  tail -20 "$work/top.stderr" >&2; exit 1; }
t2=$(date +%s)
nextpnr-ice40 "--$dev" --package "$pkg" --json "$work/tsr_ice40.json" --pcf "$root/hw/fpga/ice40/icebreaker.pcf" \
  --freq "$clock_mhz" --asc "$work/tsr_ice40.asc" --report "$work/report.json" --seed 1 \
  >"$work/nextpnr.log" 2>&1 || { tail -30 "$work/nextpnr.log" >&2; exit 1; }
icepack "$work/tsr_ice40.asc" "$work/tsr_ice40.bin"
icetime -d "$dev" -P "$pkg" -c "$clock_mhz" -mt -r "$work/icetime.txt" "$work/tsr_ice40.asc" >"$work/icetime.log" 2>&1 || true
t3=$(date +%s)

"$py" - "$board" "$work" "$cfg" "$((t1 - t0))" "$((t3 - t1))" <<'PY'
import json, os, re, sys
board, work, cfg, t_core, t_rest = sys.argv[1:6]
b = json.load(open(board))
rep = json.load(open(os.path.join(work, "report.json")))
util = rep.get("utilization", {})
names = {"LC": "ICESTORM_LC", "EBR": "ICESTORM_RAM", "SPRAM": "ICESTORM_SPRAM", "DSP": "ICESTORM_DSP"}
print(f"iCE40 flow: config {cfg} on {b['name']} ({b['part']}), clock {b['clock_mhz']} MHz")
print(f"{'resource':<8} {'used':>6} {'board':>6} {'share':>7}")
over = []
for k, budget in b["resources"].items():
    u = util.get(names.get(k, k), {}).get("used", 0)
    print(f"{k:<8} {u:>6} {budget:>6} {100.0 * u / budget:>6.1f}%")
    if u > budget:
        over.append(k)
fmax = [(c, v.get("achieved", 0.0)) for c, v in rep.get("fmax", {}).items()]
for c, f in fmax:
    print(f"Fmax (nextpnr) {c}: {f:.2f} MHz")
icet = open(os.path.join(work, "icetime.log")).read()
m = re.search(r"Timing estimate: ([0-9.]+) ns \(([0-9.]+) MHz\)", icet)
print(f"Fmax (icetime): {m.group(2)} MHz ({m.group(1)} ns critical path)" if m else "Fmax (icetime): not reported (see icetime.log)")
size = os.path.getsize(os.path.join(work, "tsr_ice40.bin"))
print(f"bitstream: {work}/tsr_ice40.bin, {size} bytes")
print(f"wall time: core synthesis {t_core} s, wrapper synthesis + place and route + pack + timing {t_rest} s")
slow = [f for _, f in fmax if f < b["clock_mhz"]]
if over:
    sys.exit(f"ice40 flow: does not fit: {', '.join(over)} over the board's budget")
if slow:
    sys.exit(f"ice40 flow: timing fails: Fmax below the board clock of {b['clock_mhz']} MHz")
PY
