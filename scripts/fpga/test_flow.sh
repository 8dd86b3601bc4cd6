#!/usr/bin/env bash
# CI check of the vendor-flow inputs (the flows themselves need Vivado/Vitis):
# gen_flow.py for a Zynq-7000, a Zynq UltraScale+ and an Alveo board; the
# generated kernel.xml is well-formed (xmllint when present) and its
# arguments, offsets, order and control protocol equal the register table
# as written in isa/tsr_regs.h (parsed here independently of the C emitter);
# params.tcl carries the board file's part and clock; tsr_kernel (hw/fpga)
# lints clean with tsr_top (Verilator -Wall, yosys, Icarus).
# Usage: scripts/fpga/test_flow.sh TESSERA_BIN WORKDIR
set -euo pipefail
cli=$1; work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work"; mkdir -p "$work"
for b in pynq-z1 ultra96-v2 u250; do
  /usr/bin/python3 "$root/scripts/fpga/gen_flow.py" "$cli" "$b" default "$work/$b"
  if command -v xmllint >/dev/null; then xmllint --noout "$work/$b/kernel.xml"; fi
done
/usr/bin/python3 - "$root" "$work" <<'PY'
import json, re, sys, xml.etree.ElementTree as ET
root, work = sys.argv[1:]
hdr = open(f"{root}/isa/tsr_regs.h").read()
reg = {m.group(1): int(m.group(2), 0) for m in re.finditer(r"TSR_REG_(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)", hdr)}
bad = []
def check(cond, what):
    if not cond: bad.append(what)
check(reg["AP_CTRL"] == 0 and reg["GIE"] == 4 and reg["IER"] == 8 and reg["ISR"] == 0xC, "ap_ctrl_hs block at 0x00-0x0C")
# The arguments in order: insns (pointer: LO at INSN_ADDR, HI at +4), count.
want = [("insns", reg["INSN_ADDR"], 8, "1"), ("count", reg["INSN_COUNT"], 4, "0")]
check(reg["INSN_ADDR_HI"] == reg["INSN_ADDR"] + 4, "pointer argument as two words")
check(min(reg[k] for k in reg if k not in ("AP_CTRL", "GIE", "IER", "ISR", "INSN_ADDR", "INSN_ADDR_HI", "INSN_COUNT", "MAP_BYTES"))
      >= reg["INSN_COUNT"] + 4, "Tessera's registers after the arguments")
for b, bus in (("pynq-z1", None), ("ultra96-v2", None), ("u250", None)):
    k = ET.parse(f"{work}/{b}/kernel.xml").getroot().find("kernel")
    check(k.get("hwControlProtocol") == "ap_ctrl_hs" and k.get("name") == "tessera", f"{b}: kernel name/protocol")
    args = k.findall("args/arg")
    got = [(a.get("name"), int(a.get("offset"), 16), int(a.get("size"), 16), a.get("addressQualifier")) for a in args]
    check(got == want, f"{b}: args {got} != {want}")
    check([int(a.get("id")) for a in args] == list(range(len(args))), f"{b}: arg ids in order")
    ports = {p.get("name"): p for p in k.findall("ports/port")}
    check(set(ports) == {"s_axi_control", "m_axi_gmem"}, f"{b}: ports {sorted(ports)}")
    check(all(a.get("port") in ports for a in args), f"{b}: args on declared ports")
    board = json.load(open(f"{root}/boards/{b}.json"))
    params = open(f"{work}/{b}/params.tcl").read()
    check(f"set tsr_part {board['part']}\n" in params, f"{b}: part in params.tcl")
    check(f"set tsr_clock_mhz {board['clock_mhz']}\n" in params, f"{b}: clock in params.tcl")
link = open(f"{work}/u250/link.cfg").read()
check("sp=tessera_1.m_axi_gmem:" in link and "freqHz=300000000:tessera_1.ap_clk" in link, "u250 link.cfg")
if bad:
    sys.exit("test_flow: " + "; ".join(bad))
print("test_flow: kernel.xml (3 boards) matches isa/tsr_regs.h; params.tcl and link.cfg match boards/*.json")
PY
srcs=("$work/pynq-z1/tsr_pkg.sv" "$root"/hw/rtl/*.sv "$root/hw/fpga/tsr_kernel.sv")
verilator --lint-only -Wall -I"$root/hw/rtl" "$root/hw/rtl/lint_waivers.vlt" "$root/hw/fpga/lint_waivers.vlt" "${srcs[@]}" --top-module tsr_kernel
yosys -q -p "read_verilog -sv ${srcs[*]}; hierarchy -check -top tsr_kernel; proc" > "$work/yosys.log"
iverilog -g2012 -I"$root/hw/rtl" -o "$work/kernel.vvp" -s tsr_kernel "${srcs[@]}" 2> >(grep -v "sorry: constant selects" >&2)
echo "test_flow: tsr_kernel lints clean (verilator -Wall, yosys, iverilog)"
