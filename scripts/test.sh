#!/usr/bin/env bash
# The test command: build and run every test, then again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Exit status is CI's verdict.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
# One cache of Verilated models for both build trees (keyed by config and RTL sources).
export TESSERA_CACHE=${TESSERA_CACHE:-$PWD/build/rtl-cache}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTSR_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$JOBS"
# The RTL testbenches, lint and synthesis have no C code to sanitize: run
# only the C tests (including those driving the RTL backend) again. The
# serial-core soaks and the gate-level run exercise RTL through the same C
# harness the other RTL-backend tests sanitize, so they run once.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$JOBS" -E '^rtl_|^gl_|^soak_serial_'
# A short run of each libFuzzer target (build-fuzz, clang + ASan/UBSan):
# a fixed number of inputs from a fixed seed, so the verdict is the same on
# every run of the same tree; the documented long run, which explores, is
# `scripts/fuzz.sh` (10 minutes per target).
FUZZ_RUNS=${TSR_FUZZ_RUNS:-100000} FUZZ_SEED=1 ./scripts/fuzz.sh
echo "test: all passed (release, ASan/UBSan, fuzz smoke run)"
