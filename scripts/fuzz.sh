#!/usr/bin/env bash
# Build the libFuzzer targets (fuzz/, clang with ASan + UBSan) in build-fuzz
# and run each for SECONDS (default 600 = the documented long run; CI runs
# 20 s each). Prints per target: executions, edge coverage (cov), features
# (ft), corpus size and findings; exit status 1 if any target found a crash,
# leak, timeout or out-of-memory input (saved in build-fuzz/findings/TARGET/,
# emptied when the target's next run starts).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   FUZZ_PARALLEL=2 scripts/fuzz.sh 600     # two targets at a time
#   FUZZ_COVERAGE=1 scripts/fuzz.sh 600     # then line/branch coverage of the
#                                            # code each target is aimed at
#                                            # (llvm-cov over the final corpus)
#
# The committed seeds (fuzz/corpus/TARGET) are copied into a working corpus
# (build-fuzz/corpus/TARGET) that grows across runs; the tree stays clean.
# Reproduce a finding: build-fuzz/fuzz/TARGET build-fuzz/findings/TARGET/crash-...
#
# FUZZ_RUNS=N runs each target for N inputs instead of SECONDS, from the
# fixed seed FUZZ_SEED (default 1): the same inputs on every machine, so a
# verdict is reproducible. CI's smoke run does this (scripts/test.sh): a
# random smoke run failed CI on whatever it happened to reach that day;
# finding new bugs is the long run's job.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-600}
shift || true
ALL=(fuzz_asm fuzz_decode_verify fuzz_npy fuzz_config fuzz_onnx)
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL[@]}"); fi
PAR=${FUZZ_PARALLEL:-1}
B=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTSR_FUZZ=ON >/dev/null
cmake --build "$B" -j "$(nproc)" --target "${TARGETS[@]}" >/dev/null

run_one() {
  local t=$1 corp="$B/corpus/$1" find="$B/findings/$1" dict=()
  rm -rf "$find" # findings are this run's (a fixed one must not fail the next run)
  mkdir -p "$corp" "$find"
  cp -n fuzz/corpus/"$t"/* "$corp"/
  [ -f fuzz/"$t".dict ] && dict=(-dict=fuzz/"$t".dict)
  # -timeout: an input running 10 s is a hang finding; -rss_limit_mb: 2 GiB
  # per input is an out-of-memory finding (bounded work on any input).
  local budget=(-max_total_time="$SECS")
  [ -n "${FUZZ_RUNS:-}" ] && budget=(-runs="$FUZZ_RUNS" -seed="${FUZZ_SEED:-1}")
  "$B"/fuzz/"$t" "$corp" "${dict[@]}" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$find"/ >"$B/$t.log" 2>&1 || true
}

i=0
for t in "${TARGETS[@]}"; do
  run_one "$t" &
  i=$((i + 1))
  if [ $((i % PAR)) -eq 0 ]; then wait; fi
done
wait

status=0
printf '%-20s %12s %8s %8s %8s %s\n' target executions cov ft corpus findings
for t in "${TARGETS[@]}"; do
  log="$B/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  nfind=$(find "$B/findings/$t" -type f | wc -l)
  printf '%-20s %12s %8s %8s %8s %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$nfind"
  if [ "$nfind" -gt 0 ] || [ -z "$execs" ]; then
    status=1
    echo "  $t: see $log and $B/findings/$t/" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz:)' "$log" | head -5 >&2 || true
  fi
done

# Source coverage: the final corpus replayed once through a clang build
# with coverage mapping (fuzz_replay.c as main), reported for the files
# each target is aimed at.
if [ -n "${FUZZ_COVERAGE:-}" ]; then
  if ! command -v llvm-cov >/dev/null || ! command -v llvm-profdata >/dev/null; then
    echo "fuzz: FUZZ_COVERAGE needs llvm-cov and llvm-profdata (Debian package llvm)" >&2
    exit 1
  fi
  C=build-fuzzcov
  CC=clang CXX=clang++ cmake -S . -B "$C" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="-fprofile-instr-generate -fcoverage-mapping" >/dev/null
  cmake --build "$C" -j "$(nproc)" --target "${TARGETS[@]}" >/dev/null
  echo "source coverage of the final corpus (llvm-cov; regions, functions, lines, branches):"
  for t in "${TARGETS[@]}"; do
    case $t in
      fuzz_asm) src=(isa/tsr_asm.c) ;;
      fuzz_decode_verify) src=(isa/tsr_isa.c isa/tsr_verify.c isa/tsr_pipe.c) ;;
      fuzz_npy) src=(jit/tsr_npy.c) ;;
      fuzz_config) src=(isa/tsr_config.c) ;;
      fuzz_onnx) src=(onnx/tsr_onnx.c) ;;
      *) src=() ;;
    esac
    LLVM_PROFILE_FILE="$C/$t.profraw" "$C/fuzz/$t" "$B/corpus/$t" >/dev/null
    llvm-profdata merge -o "$C/$t.profdata" "$C/$t.profraw"
    echo "$t:"
    llvm-cov report "$C/fuzz/$t" -instr-profile="$C/$t.profdata" "${src[@]}" |
      awk 'NR == 1 || /^[a-z]/ || /^TOTAL/'
  done
fi
exit $status
