#!/usr/bin/env bash
# Print the top module of the accelerator for a generated package: the
# serial core's tsr_serial_top when the config sets SERIAL_CORE = 1, else
# tsr_top. Every script that builds, lints or synthesizes the design asks
# here, so the choice lives in one place.
# Usage: scripts/rtl_top.sh TSR_PKG_SV
set -euo pipefail
if grep -q "localparam int SERIAL_CORE = 1;" "$1"; then echo tsr_serial_top; else echo tsr_top; fi
