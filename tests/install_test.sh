#!/usr/bin/env bash
# `cmake --install`: the tessera program, libtessera (C and C++ APIs) with its headers, CMake package and pkg-config
# file, and the Python module
# land under a prefix; a separate CMake project (find_package) and a cc build (pkg-config) link the installed library,
# run the C API checks and the README's C++ example, and need libtessera but no LLVM themselves; the installed headers
# include nothing from outside the prefix but the standard libraries; the installed program and module run.
set -u
build=$(cd "${1:?usage: install_test.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
prefix=$work/prefix
if cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then ok; else bad "install: $(tail -3 "$work/install.log")"; fi
for f in bin/tessera include/tessera/tessera.h lib/libtessera.so lib/libtessera.a lib/cmake/tessera/tesseraConfig.cmake \
  lib/cmake/tessera/tesseraConfigVersion.cmake lib/pkgconfig/tessera.pc share/doc/tessera/LICENSE; do
  [[ -e $prefix/$f ]] && ok || bad "not installed: $f"
done
ls "$prefix"/lib/libtessera.so.0.3* >/dev/null 2>&1 && ok || bad "no versioned libtessera.so.0.3"
[[ $("$prefix/bin/tessera" --version) == "tessera "* ]] && ok || bad "installed tessera --version"

# The installed headers: the public ones and the generator headers they reach, every include resolved inside the
# prefix, no third-party header (only the C and C++ standard libraries'), each compiling alone.
for f in tessera/tessera.hpp tessera/tensor.hpp tessera/attention.hpp tessera/sparse.hpp tessera/cuda.hpp \
  tessera/generator/gemm/cpu_gemm_spec.hpp; do
  [[ -e $prefix/include/$f ]] && ok || bad "not installed: include/$f"
done
foreign=$(grep -rhE '^#include' "$prefix/include" | grep -vE '^#include <[a-z_]+>$|^#include <std(int|def|bool)\.h>$|^#include "tessera/' | sort -u)
[[ -z $foreign ]] && ok || bad "installed headers include: $foreign"
missing=$(grep -rhoE '^#include "tessera/[^"]+"' "$prefix/include" | sed 's/#include "//; s/"$//' | sort -u |
  while read -r h; do [[ -e $prefix/include/$h ]] || echo "$h"; done)
[[ -z $missing ]] && ok || bad "installed headers name headers not installed: $missing"
for h in "$prefix"/include/tessera/*.hpp; do
  echo "#include \"tessera/$(basename "$h")\"" | g++ -std=c++20 -x c++ -fsyntax-only -I"$prefix/include" - 2>"$work/h.log" &&
    ok || bad "$(basename "$h") alone: $(head -3 "$work/h.log")"
done

# README_EXAMPLE: the README's C++ example as the build extracted it.
if cmake -S "$here/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DREADME_EXAMPLE="$build/tests/readme_example.cpp" >"$work/cmake.log" 2>&1 &&
  cmake --build "$work/consumer" >>"$work/cmake.log" 2>&1 && r=$(LD_LIBRARY_PATH=$prefix/lib "$work/consumer/consumer") &&
  [[ $r == *" 0 failures"* ]]; then ok; else bad "CMake consumer: ${r:-} $(tail -5 "$work/cmake.log")"; fi
needed=$(readelf -d "$work/consumer/consumer" 2>/dev/null | grep NEEDED)
[[ $needed == *libtessera.so.0.3* && $needed != *LLVM* ]] && ok || bad "consumer needs: $needed"
if r=$(LD_LIBRARY_PATH=$prefix/lib "$work/consumer/cpp_consumer" 2>&1); then ok
else bad "the README's C++ example against the installed package: $r"; fi
needed=$(readelf -d "$work/consumer/cpp_consumer" 2>/dev/null | grep NEEDED)
[[ $needed == *libtessera.so.0.3* && $needed != *LLVM* && $needed != *xgboost* && $needed != *sqlite* ]] && ok ||
  bad "C++ consumer needs: $needed"
if r=$("$work/consumer/cpp_static_consumer" 2>&1); then ok; else bad "the C++ example with libtessera.a: $r"; fi
needed=$(readelf -d "$work/consumer/cpp_static_consumer" 2>/dev/null | grep NEEDED)
[[ $needed != *libtessera* && $needed != *xgboost* && $needed != *sqlite* ]] && ok || bad "static consumer needs: $needed"

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
