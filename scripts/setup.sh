#!/usr/bin/env bash
# Install everything Tessera needs on Debian 12 (the only manual step).
# Packages and why: see "Dependencies" in README.md.
set -euo pipefail
PKGS=(
  build-essential pkg-config cmake ninja-build   # C11 toolchain and build
  libcjson-dev                                   # config JSON parsing
  libcmocka-dev                                  # unit-test framework
  verilator yosys iverilog                       # RTL simulation, lint, synthesis
  python3-numpy                                  # .npy test data (JIT tests)
  g++ libsystemc-dev                             # SystemC/TLM-2.0 timed model (backend systemc, sim/systemc)
)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup: all packages present"
