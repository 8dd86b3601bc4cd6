#!/usr/bin/env bash
# `tessera fpga fit` end to end (CTest fpga_fit_tiny): the tiny preset is
# synthesized once (yosys synth_xilinx, cached in $TESSERA_CACHE/synth) and
# must fit a Pynq-Z1 but not tests/boards/small-test.json. The verdict is
# recomputed here from the printed table (used <= floor(budget x limit)),
# independently of the C code; the second call must come from the cache;
# bad board files and usage errors get their exit status and message.
# Usage: tests/fpga_fit.sh TESSERA_BIN
set -uo pipefail
cli=$1
root=$(cd "$(dirname "$0")/.." && pwd)
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Recompute the verdict from the table: "fits" or the over-budget classes.
verdict() {
  awk '/^resource/ { t = 1; next }
       t && NF == 5 { lim = $5; sub(/%/, "", lim);
         cap = int($3 * lim / 100 + 1e-9); if ($2 > cap) over = over " " $1 }
       END { print over == "" ? "fits" : "over:" over }'
}

out=$("$cli" fpga fit --board pynq-z1 --config tiny); rc=$?
echo "$out"
[[ $rc == 0 ]] || bad "tiny on pynq-z1: exit $rc, want 0"
[[ $(echo "$out" | tail -1) == fits ]] || bad "tiny on pynq-z1: last line is not 'fits'"
[[ $(echo "$out" | verdict) == fits ]] || bad "tiny on pynq-z1: the table says $(echo "$out" | verdict)"
echo "$out" | grep -q '^DSP ' || bad "tiny on pynq-z1: no DSP row"

out=$("$cli" fpga fit --board "$root/tests/boards/small-test.json" --config tiny); rc=$?
echo "$out"
[[ $rc == 1 ]] || bad "tiny on small-test: exit $rc, want 1"
echo "$out" | head -1 | grep -q '(cached)' || bad "tiny on small-test: second synthesis of the same design was not cached"
want=$(echo "$out" | verdict)
[[ $want == over:* ]] || bad "tiny on small-test: the table says it fits"
last=$(echo "$out" | tail -1)
[[ $last == "does not fit: "* ]] || bad "tiny on small-test: last line '$last'"
for cls in ${want#over:}; do
  echo "$last" | grep -q "$cls [0-9.]* > " || bad "verdict does not name $cls: $last"
done
n_named=$(echo "$last" | grep -o ' > ' | wc -l)
[[ $n_named == $(echo ${want#over:} | wc -w) ]] || bad "verdict names $n_named classes, table has: $want"

# Bad input: exact one-line messages and exit 3 / 2.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sed 's/"DSP": 20/"DSP": -1/' "$root/tests/boards/small-test.json" > "$tmp/neg.json"
msg=$("$cli" fpga fit --board "$tmp/neg.json" --config tiny 2>&1); rc=$?
[[ $rc == 3 && $msg == "tessera fpga: error: $tmp/neg.json: key resources.DSP = -1 is out of range: allowed [0, 1e+08]" ]] ||
  bad "negative DSP: exit $rc, message '$msg'"
echo '{"name": "x",' > "$tmp/trunc.json"
msg=$("$cli" fpga fit --board "$tmp/trunc.json" 2>&1); rc=$?
[[ $rc == 3 && $msg == "tessera fpga: error: $tmp/trunc.json: malformed board file: not a JSON object" ]] ||
  bad "truncated JSON: exit $rc, message '$msg'"
msg=$("$cli" fpga fit --config tiny 2>&1); rc=$?
[[ $rc == 2 ]] || bad "missing --board: exit $rc, want 2 ($msg)"

# --estimate: the CLI asks synth.sh for the board family's per-module
# estimate (a stand-in synth.sh under TESSERA_ROOT records what it was asked;
# scripts/dse/test_dse.py checks the estimate itself against the full flow).
mkdir -p "$tmp/root/scripts"
printf '#!/bin/sh\necho "$4" > "%s/asked"\necho "resources LUT=1000 FF=900 BRAM36=2.5 DSP=4 URAM=0"\n' "$tmp" \
  > "$tmp/root/scripts/synth.sh"
chmod +x "$tmp/root/scripts/synth.sh"
out=$(TESSERA_ROOT="$tmp/root" TESSERA_CACHE="$tmp/cache" "$cli" fpga fit --board u55c --config tiny --estimate); rc=$?
[[ $rc == 0 && $(cat "$tmp/asked" 2>/dev/null) == xcup-est ]] ||
  bad "--estimate on u55c: exit $rc, synth.sh asked for '$(cat "$tmp/asked" 2>/dev/null)', want xcup-est"
echo "$out" | head -1 | grep -q 'per-module estimate' || bad "--estimate: the header does not say it is the per-module estimate"
out=$(TESSERA_ROOT="$tmp/root" TESSERA_CACHE="$tmp/cache" "$cli" fpga fit --board pynq-z1 --config tiny --estimate); rc=$?
[[ $rc == 0 && $(cat "$tmp/asked") == xc7-est ]] || bad "--estimate on pynq-z1: exit $rc, asked '$(cat "$tmp/asked")'"
msg=$("$cli" fpga fit --board ice40-up5k --config ice40 --estimate 2>&1); rc=$?
[[ $rc == 2 && $msg == *"--estimate is for Xilinx boards"* ]] || bad "--estimate on iCE40: exit $rc, message '$msg'"

[[ $fails == 0 ]] && echo "fpga_fit: all checks passed"
exit $((fails > 0))
