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
  clang libclang-rt-14-dev                       # libFuzzer targets (fuzz/, scripts/fuzz.sh): gcc has
                                                 # no libFuzzer; the runtime package is listed because
                                                 # --no-install-recommends may leave it out
  libonnx-dev protobuf-c-compiler libprotobuf-c-dev  # ONNX import: onnx.proto -> C (protoc-c), parser
  libonnx-testdata                               # ONNX node conformance cases (tests)
  python3-onnx python3-torch python3-sklearn     # train + quantize the digits CNN, build test models
  python3-torchvision                            # the model zoo's architectures (scripts/zoo, weights=None)
  nodejs                                         # ONNX Runtime (npm onnxruntime-node) as the test reference
  g++ libsystemc-dev                             # SystemC/TLM-2.0 timed model (backend systemc, sim/systemc)
  libboost-context-dev                           # the SystemC model's stages as fibers of one process
  libglpk-dev                                    # the pipeline planner's ILP (non-contiguous splits)
  nextpnr-ice40 fpga-icestorm fpga-icestorm-chipdb  # open iCE40 flow: place and route, bitstream, timing
  libxrt-dev libxrt-utils                        # backend xrt (Alveo / Zynq with XRT), xclbinutil
  python3-matplotlib                             # design-space exploration plots
  python3-yaml                                   # YAML space files for the DSE (tested: anchors, nesting)
  python3-cffi python3-dev python3-setuptools    # the tessera Python package: cffi API mode compiles its
                                                 # extension against the headers (Python.h, setuptools' build)
  python3-pytest                                 # the Python package's tests (CTest python_api)
  python3-pandas                                 # the Python package's report and DSE sweep as DataFrames
  slurmctld slurmd slurm-client munge            # DSE sweeps as a Slurm job array (single-node test)
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
# ONNX Runtime (CPU) for the ONNX tests' reference outputs, once, into a cache
# (`--ignore-scripts`: its postinstall would try to download CUDA files).
ORT_DIR=${TSR_ORT_DIR:-$HOME/.cache/tessera/ort}
if command -v npm >/dev/null && [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ORT_DIR"
  (cd "$ORT_DIR" && npm install onnxruntime-node@1.20.1 --ignore-scripts --no-audit --no-fund >/dev/null)
fi
echo "setup: all packages present"
