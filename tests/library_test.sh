#!/usr/bin/env bash
# `tessera library build`: a library built from tests/library/manifest.json is linked by a C program (cc, static and
# shared, and pkg-config) and by a separate CMake project (find_package), whose every kernel variant is checked against
# a reference; it depends on nothing but libc; a rebuild of an unchanged manifest does nothing and a changed entry
# rebuilds only its own kernels; bad manifests exit 2 naming the entry and write nothing; a failed build leaves the
# old library as it was.
set -u
bin=${1:?usage: library_test.sh path/to/tessera}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TESSERA_CACHE_DIR=$work/cache
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

lib=$work/tlib
if out=$("$bin" library build "$here/library/manifest.json" --out "$lib" --jobs 2 2>&1); then ok; else
  bad "library build: $out"; echo "$failed failed"; exit 1; fi
[[ $out == *"9 kernels"*"compiled"* ]] && ok || bad "build summary: $out"
# A range of M (1..16) chooses configs at its ends and the powers of two between.
chosen=$(grep -c 'chosen for [0-9]*x1024x1024' "$lib/include/tlib.h")
[[ $chosen -ge 2 ]] && ok || bad "range 1..16x1024x1024: $chosen variants chosen for its sizes"
for f in include/tlib.h lib/libtlib.a lib/libtlib.so.1 lib/libtlib.so lib/cmake/tlib/tlibConfig.cmake \
  lib/pkgconfig/tlib.pc tlib.lock.json; do
  [[ -e $lib/$f ]] && ok || bad "missing $f"
done

# No LLVM, NVRTC, tessera or C++ runtime behind the shared library.
needed=$(readelf -d "$lib/lib/libtlib.so.1" | grep NEEDED)
if [[ -n $needed && $needed != *LLVM* && $needed != *nvrtc* && $needed != *tessera* && $needed != *stdc++* ]]; then ok
else bad "libtlib.so.1 needs: $needed"; fi
if readelf -d "$lib/lib/libtlib.so.1" | grep -q TEXTREL; then bad "text relocations in libtlib.so.1"; else ok; fi

# Each variant is its own ISA's code whichever host built it: AVX-512 variants in zmm registers, AVX2 variants without
# an EVEX instruction (no zmm, mask or ymm16-31 register) that an AVX2-only CPU could not run.
avx512_objects=0 avx2_objects=0
for o in "$lib"/obj/*_avx512_*.o; do
  avx512_objects=$((avx512_objects + 1))
  objdump -d "$o" | grep -q '%zmm' && ok || bad "AVX-512 variant without a zmm instruction: $(basename "$o")"
done
for o in "$lib"/obj/*_avx2_*.o; do
  avx2_objects=$((avx2_objects + 1))
  if objdump -d "$o" | grep -qE '%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])'; then
    bad "AVX2 variant with an EVEX instruction: $(basename "$o")"; else ok; fi
done
[[ $avx512_objects -ge 10 && $avx2_objects -ge 10 ]] && ok || bad "objects: $avx512_objects AVX-512, $avx2_objects AVX2"

# A C program, static and shared, and through pkg-config.
if cc -std=c11 -O1 -Wall -Werror -I "$lib/include" "$here/library/library_check.c" "$lib/lib/libtlib.a" -lm -lpthread \
  -o "$work/check_static" && r=$("$work/check_static") && [[ $r == *" 0 failures"* ]]; then ok; else
  bad "static C program: ${r:-did not build}"; fi
if cc -std=c11 -O1 -Wall -Werror -I "$lib/include" "$here/library/library_check.c" -L "$lib/lib" -ltlib -lm \
  -Wl,-rpath,"$lib/lib" -o "$work/check_shared" && r=$("$work/check_shared") && [[ $r == *" 0 failures"* ]]; then ok
else bad "shared C program: ${r:-did not build}"; fi
if flags=$(PKG_CONFIG_PATH=$lib/lib/pkgconfig pkg-config --cflags --libs tlib) &&
  cc -std=c11 "$here/library/library_check.c" $flags -lm -Wl,-rpath,"$lib/lib" -o "$work/check_pc" &&
  r=$("$work/check_pc") && [[ $r == *" 0 failures"* ]]; then ok; else bad "pkg-config: ${flags:-} ${r:-}"; fi

# A separate CMake project.
if cmake -S "$here/library/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$lib" -DCMAKE_BUILD_TYPE=Release \
  >"$work/cmake.log" 2>&1 && cmake --build "$work/consumer" >>"$work/cmake.log" 2>&1 &&
  r=$("$work/consumer/library_check") && [[ $r == *" 0 failures"* ]] &&
  r=$("$work/consumer/library_check_static") && [[ $r == *" 0 failures"* ]]; then ok; else
  bad "CMake consumer: ${r:-} $(tail -5 "$work/cmake.log")"; fi

# An unchanged manifest: nothing done. A changed entry: only its kernels compiled, the rest reused.
out=$("$bin" library build "$here/library/manifest.json" --out "$lib" 2>&1)
[[ $out == *"up to date"* ]] && ok || bad "rebuild of an unchanged manifest: $out"
sed 's/"100x200x300"/"100x200x300", "40x50x60"/' "$here/library/manifest.json" >"$work/changed.json"
out=$("$bin" library build "$work/changed.json" --out "$lib" 2>&1)
compiled=$(sed -n 's/.*(\([0-9]*\) compiled, \([0-9]*\) reused).*/\1/p' <<<"$out")
reused=$(sed -n 's/.*(\([0-9]*\) compiled, \([0-9]*\) reused).*/\2/p' <<<"$out")
if [[ -n $compiled && $compiled -le 4 && $reused -ge 8 ]]; then ok; else bad "changed entry rebuilt: $out"; fi
if r=$("$work/check_shared") && [[ $r == *" 0 failures"* ]]; then ok; else bad "rebuilt library: $r"; fi
# A lock file edited into another shape (valid JSON) counts as none: the library is rebuilt whole.
echo '{"identity": 5, "variants": 5.5e70, "symbols": [1, 2]}' >"$lib/tlib.lock.json"
if out=$("$bin" library build "$work/changed.json" --out "$lib" 2>&1) && [[ $out != *"up to date"* ]] &&
  r=$("$work/check_shared") && [[ $r == *" 0 failures"* ]]; then ok; else bad "build over a malformed lock: $out"; fi

# Bad manifests: exit 2, one line naming the entry and field, no output directory.
bad_manifest() {
  local needle=$1 text=$2 err code
  printf '%s' "$text" >"$work/bad.json"
  err=$("$bin" library build "$work/bad.json" --out "$work/badout" 2>&1 >/dev/null)
  code=$?
  if [[ $code -eq 2 && $err == *"$needle"* && ! -e $work/badout && $(wc -l <<<"$err") -eq 1 ]]; then ok; else
    bad "bad manifest ($needle): exit $code: $err"; fi
}
k='"op": "gemm", "targets": ["cpu:avx2"], "shapes": ["8x8x8"]'
bad_manifest "invalid at byte" '{"name": "x", "kernels": [ {'
bad_manifest "unknown op 'conv'" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"op\": \"conv\", \"targets\": [\"cpu:avx2\"], \"shapes\": [\"8x8x8\"]}]}"
bad_manifest "kernels[0] ('a'): unknown field 'tile'" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", $k, \"tile\": 3}]}"
bad_manifest "'cuda:sm_80': libraries hold CPU kernels so far" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"op\": \"gemm\", \"targets\": [\"cuda:sm_80\"], \"shapes\": [\"8x8x8\"]}]}"
bad_manifest "kernels[1].name" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", $k}, {\"name\": \"a\", $k}]}"
bad_manifest "kernels[0] ('a').epilogue" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", $k, \"epilogue\": \"gelu(acc\"}]}"
bad_manifest "cpu:amx holds AMX tile kernels" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"op\": \"gemm\", \"targets\": [\"cpu:amx\"], \"shapes\": [\"8x8x8\"]}]}"
bad_manifest "shapes[0]" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"op\": \"gemm\", \"targets\": [\"cpu:avx2\"], \"shapes\": [\"8x0x8\"]}]}"
bad_manifest "C identifier" "{\"name\": \"my-lib\", \"kernels\": [{\"name\": \"a\", $k}]}"
bad_manifest "'f16'" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", $k, \"dtype\": \"f16\"}]}"
bad_manifest "out_dtype" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", $k, \"out_dtype\": \"i32\"}]}"
sp='"targets": ["cpu:avx2"], "shapes": ["8x8x8"]'
bad_manifest "kernels[0] ('s').format" "{\"name\": \"x\", \"kernels\": [{\"name\": \"s\", \"op\": \"spmm\", \"format\": \"coo\", $sp}]}"
bad_manifest "'block' is required" "{\"name\": \"x\", \"kernels\": [{\"name\": \"s\", \"op\": \"spmm\", \"format\": \"bsr\", $sp}]}"
bad_manifest "unknown field 'layout_a'" "{\"name\": \"x\", \"kernels\": [{\"name\": \"s\", \"op\": \"spmm\", \"layout_a\": \"col\", $sp}]}"
bad_manifest "kernels[0] ('s').dtype" "{\"name\": \"x\", \"kernels\": [{\"name\": \"s\", \"op\": \"sddmm\", \"dtype\": \"bf16\", $sp}]}"
bad_manifest "kernels[0] ('s').epilogue" "{\"name\": \"x\", \"kernels\": [{\"name\": \"s\", \"op\": \"sddmm\", \"epilogue\": \"acc + beta*c\", $sp}]}"
bad_manifest "without a batch" "{\"name\": \"x\", \"kernels\": [{\"name\": \"s\", \"op\": \"spmm\", \"targets\": [\"cpu:avx2\"], \"shapes\": [\"8x8x8x2\"]}]}"
bad_manifest "the range 64..8 is empty" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"op\": \"gemm\", \"targets\": [\"cpu:avx2\"], \"shapes\": [\"64..8x8x8\"]}]}"
bad_manifest "expand to more than 256" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"op\": \"gemm\", \"targets\": [\"cpu:avx2\"], \"shapes\": [\"1..999x1..999x1..999x1..9\"]}]}"
at='"op": "attention", "targets": ["cpu:avx2"], "shapes": ["1x512x8x2"]'
bad_manifest "'head_dim' is required" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", $at}]}"
bad_manifest "score modifiers that read tensors are not in libraries yet" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"head_dim\": 64, \"score_mod\": \"s + bias[h, i - j]\", $at}]}"
bad_manifest "SQxSKVxHEADSxKV_HEADS" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"head_dim\": 64, \"op\": \"attention\", \"targets\": [\"cpu:avx2\"], \"shapes\": [\"1x512x8\"]}]}"
bad_manifest "not a multiple of 3 KV heads" "{\"name\": \"x\", \"kernels\": [{\"name\": \"a\", \"head_dim\": 64, \"op\": \"attention\", \"targets\": [\"cpu:avx2\"], \"shapes\": [\"1x512x8x3\"]}]}"
bad_manifest "manifest: JSON" ""
bad_manifest "number overflow" '{"name": "x", "kernels": 1e99999}'  # found by fuzz_manifest: aborted before
rm -f "$work/bad.json"
err=$("$bin" library build "$work/missing.json" --out "$work/badout" 2>&1 >/dev/null)
[[ $? -eq 2 && $err == *"cannot read"* ]] && ok || bad "missing manifest: $err"

# A directory that is not a library is not replaced; a failed build leaves the old library as it was.
mkdir "$work/precious" && echo keep >"$work/precious/file"
err=$("$bin" library build "$here/library/manifest.json" --out "$work/precious" 2>&1 >/dev/null)
[[ $? -eq 2 && $(cat "$work/precious/file") == keep ]] && ok || bad "foreign --out directory: $err"
before=$(cd "$lib" && find . -type f | sort | xargs md5sum | md5sum)
err=$(TESSERA_HOST_CC=/nonexistent/cc "$bin" library build "$here/library/manifest.json" --out "$lib" 2>&1 >/dev/null)
code=$?
after=$(cd "$lib" && find . -type f | sort | xargs md5sum | md5sum)
leftovers=$(find "$work" -maxdepth 1 -name '.tlib.*' | head -1)
if [[ $code -eq 3 && $before == "$after" && -z $leftovers ]]; then ok; else
  bad "failed build: exit $code, changed: $([[ $before == "$after" ]] && echo no || echo yes), left: $leftovers: $err"; fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
