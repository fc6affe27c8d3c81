#!/usr/bin/env bash
# `cmake --install`: the tessera program, the C API with its CMake package and pkg-config file, and the Python module
# land under a prefix; a separate CMake project (find_package) and a cc build (pkg-config) link the installed library,
# run the C API checks, and need libtessera but no LLVM themselves; the installed program and module run.
set -u
build=${1:?usage: install_test.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
prefix=$work/prefix
if cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then ok; else bad "install: $(tail -3 "$work/install.log")"; fi
for f in bin/tessera include/tessera/tessera.h lib/libtessera.so lib/cmake/tessera/tesseraConfig.cmake \
  lib/cmake/tessera/tesseraConfigVersion.cmake lib/pkgconfig/tessera.pc share/doc/tessera/LICENSE; do
  [[ -e $prefix/$f ]] && ok || bad "not installed: $f"
done
ls "$prefix"/lib/libtessera.so.0.3* >/dev/null 2>&1 && ok || bad "no versioned libtessera.so.0.3"
[[ $("$prefix/bin/tessera" --version) == "tessera "* ]] && ok || bad "installed tessera --version"

if cmake -S "$here/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 &&
  cmake --build "$work/consumer" >>"$work/cmake.log" 2>&1 && r=$(LD_LIBRARY_PATH=$prefix/lib "$work/consumer/consumer") &&
  [[ $r == *" 0 failures"* ]]; then ok; else bad "CMake consumer: ${r:-} $(tail -5 "$work/cmake.log")"; fi
needed=$(readelf -d "$work/consumer/consumer" 2>/dev/null | grep NEEDED)
[[ $needed == *libtessera.so.0.3* && $needed != *LLVM* ]] && ok || bad "consumer needs: $needed"

if flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs tessera) &&
  cc -std=c11 "$here/c_api/c_api_test.c" $flags -lm -Wl,-rpath,"$prefix/lib" -o "$work/pc_consumer" &&
  r=$("$work/pc_consumer") && [[ $r == *" 0 failures"* ]]; then ok; else bad "pkg-config consumer: ${flags:-} ${r:-}"; fi
if cc -std=c11 "$here/c_api/c_api_ops_test.c" $flags -lm -Wl,-rpath,"$prefix/lib" -o "$work/pc_ops" &&
  r=$("$work/pc_ops") && [[ $r == *" 0 failures"* ]]; then ok; else bad "pkg-config consumer of attention and sparse: ${r:-}"; fi

if [[ -d $prefix/lib/python3/dist-packages/tessera ]]; then
  if PYTHONPATH=$prefix/lib/python3/dist-packages /usr/bin/python3 -c \
    "import numpy as np, tessera; a = np.ones((4, 4), np.float32); assert (tessera.gemm(a, a) == 4).all()"; then ok
  else bad "installed Python module"; fi
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
