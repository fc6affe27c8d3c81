#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer + UndefinedBehaviorSanitizer) and runs each
# for a fixed number of inputs from its seed corpus (a copy: the tree is not written) with its dictionary
# (tests/fuzz/dict: the format's keywords and edge values), seeded, so that a run is
# repeatable. A crash, a sanitizer report or a broken property (the targets abort) fails the test and leaves the
# input that did it in the work directory, named in the output.
set -u
build=$(cd "${1:?usage: fuzz_test.sh BUILD_DIR [RUNS]}" && pwd)
runs=${2:-${TESSERA_FUZZ_RUNS:-20000}}
here=$(cd "$(dirname "$0")" && pwd)
out=$build/fuzz
if ! command -v clang++ >/dev/null; then
  echo "FAIL: clang++ is not installed (scripts/setup.sh installs it)"
  exit 1
fi
if ! { cmake -S "$here/fuzz" -B "$out" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
  ninja -C "$out"; } >"$out.log" 2>&1; then
  echo "FAIL: building the fuzz targets:"
  tail -20 "$out.log"
  exit 1
fi
failed=0
for target in epilogue spec_json matrix_market manifest disk_cache cost_model; do
  corpus=$out/corpus/$target
  rm -rf "$corpus" "$out/crashes/$target"
  mkdir -p "$corpus" "$out/crashes/$target"
  cp "$here/fuzz/corpus/$target/"* "$corpus/"
  if (cd "$out/crashes/$target" && "$out/fuzz_$target" -runs="$runs" -seed=1 -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -dict="$here/fuzz/dict/$target.dict" -print_final_stats=1 "$corpus" >"$out/$target.log" 2>&1); then
    echo "fuzz_$target: $runs inputs, $(grep -o 'cov: [0-9]*' "$out/$target.log" | tail -1), no failure"
  else
    echo "FAIL: fuzz_$target (log $out/$target.log, input in $out/crashes/$target):"
    grep -m5 -E "ERROR|runtime error|SUMMARY|Test unit written" "$out/$target.log"
    failed=$((failed + 1))
  fi
done
[[ $failed -eq 0 ]]
