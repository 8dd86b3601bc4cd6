#!/usr/bin/env bash
# Install test: `cmake --install` the build tree into a temporary prefix,
# build examples/conv_relu and examples/small_graph out of tree with
# pkg-config against it, run them (fsim), and check the installed RTL files.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR [EXTRA_CFLAGS]
set -euo pipefail
build=$1; src=$2; extra=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
export PKG_CONFIG_PATH=$tmp/prefix/lib/pkgconfig
pkg-config --exists tessera || { echo "pkg-config does not find tessera"; exit 1; }
echo "installed: $(pkg-config --modversion tessera), cflags: $(pkg-config --cflags tessera)," \
     "libs: $(pkg-config --static --libs tessera)"
for f in include/tessera/tsr_driver.h include/tessera/tsr_conv2d.h lib/libtsr_jit.a lib/libtsr_driver.a lib/libtsr_sim.a lib/libtsr_isa.a bin/tessera \
         share/tessera/hw/rtl/tsr_top.sv share/tessera/hw/rtl/lint_waivers.vlt \
         share/tessera/sim/rtl/tsr_vshim.cpp share/tessera/scripts/build_rtl_model.sh; do
  [ -e "$tmp/prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
mkdir "$tmp/ex"
CFLAGS="-O2 $extra" LDFLAGS="$extra" make -s -C "$tmp/ex" -f "$src/examples/conv_relu/Makefile"
# the kernel cache stays in memory (no files in the home directory)
TESSERA_JIT_CACHE=mem "$tmp/ex/conv_relu" fsim default
TESSERA_JIT_CACHE=mem "$tmp/ex/conv_relu" fsim tiny
# a small network through the graph API (tsr_graph.h) vs the single operators
CFLAGS="-O2 $extra" LDFLAGS="$extra" make -s -C "$tmp/ex" -f "$src/examples/small_graph/Makefile"
TESSERA_JIT_CACHE=mem "$tmp/ex/small_graph" fsim default >/dev/null
TESSERA_JIT_CACHE=mem "$tmp/ex/small_graph" fsim tiny | tail -1
