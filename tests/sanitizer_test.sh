#!/usr/bin/env bash
# The unit suites under a sanitizer, in a build of their own (BUILD_DIR/sanitize-KIND, -O0, no debug info; warnings
# are the main build's to fail on):
#   address  AddressSanitizer + UndefinedBehaviorSanitizer, every suite of tessera_tests (two shards at once), then a
#            sample of the emulator's: one kernel in 16 of the CUDA matrix and the emulator's own, attention and
#            sparse suites (the emulator's fibers annotated for ASan; the emulated kernels are host objects built by
#            the host compiler, not instrumented)
#   thread   ThreadSanitizer, the concurrency tests: the thread pool, the kernel and disk caches, runtimes shared by
#            threads, records written from several threads, kernels run on several threads (tessera_threaded_tests:
#            only the test sources that hold them are compiled)
# Any report fails the test (halt_on_error); the JIT's kernels and LLVM are not instrumented, tessera's code is.
# Building is most of the time here. -O0: an instrumented -O0 compile takes about half as long as -O1's (the tuning
# sources' unity batch 57 -> 31 s; an uninstrumented test source 20 -> 14 s), and the suites ran as fast (the code
# the sanitized library slows most, the references' loops, reads gathered doubles). The library is a unity build
# (batches of its sources joined: each header parsed and each template instantiated once a batch, not once a source).
# The address build's test sources are compiled one by one and not instrumented (tests/CMakeLists.txt), and UBSan's
# alignment and null checks are off. On Zen 3, two cores, idle: the address suites 181 + 39 s at -O0 (at -O1, before
# the references gathered their rows, 309 s); the thread build 212 s and its tests 24 s (-O1: 239 and 9 s).
set -u
build=$(cd "${1:?usage: sanitizer_test.sh BUILD_DIR address|thread}" && pwd)
kind=${2:?usage: sanitizer_test.sh BUILD_DIR address|thread}
source_dir=$(cd "$(dirname "$0")/.." && pwd)
out=$build/sanitize-$kind
case $kind in
  address)
    # UBSan's alignment and null checks were 40% of an instrumented compile (sparse_ops.cpp 23.7 -> 14.4 s): x86
    # runs a misaligned access, and ASan reports an access through a null pointer as it happens.
    sanitize=address,undefined
    no_sanitize=alignment,null
    ;;
  thread)
    sanitize=thread
    no_sanitize=
    ;;
  *)
    echo "FAIL: unknown sanitizer '$kind' (address or thread)"
    exit 2
    ;;
esac
start=$(date +%s)
if ! { cmake -S "$source_dir" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O0 \
  -DCMAKE_UNITY_BUILD=ON -DTESSERA_WERROR=OFF -DTESSERA_SANITIZE=$sanitize -DTESSERA_NO_SANITIZE=$no_sanitize -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_PYTHON=OFF &&
  ninja -C "$out" $([[ $kind == address ]] && echo tessera_tests tessera_emulator_tests || echo tessera_threaded_tests); } \
  >"$out.log" 2>&1; then
  echo "FAIL: building the $kind-sanitized suites:"
  grep -m10 -E "error|FAILED" "$out.log"
  exit 1
fi
echo "built in $(($(date +%s) - start)) s"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# Leaks inside LLVM's and the C++ runtime's one-time initialisation are not tessera's.
printf 'leak:libLLVM\nleak:libstdc++\n' >"$out/lsan.supp"
export LSAN_OPTIONS=suppressions=$out/lsan.supp
start=$(date +%s)
failed=0
# Each run's exit status is kept beside its log: a run can fail with no report a grep would find (a signal, a
# sanitizer's own fatal error, an abort in a static destructor), and then its log's end is what says why.
run() {
  local log=$1
  shift
  "$@" >"$log" 2>&1
  echo $? >"$log.status"
}
if [[ $kind == address ]]; then
  for shard in 0 1; do
    GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$shard run "$out/shard$shard.log" "$out/bin/tessera_tests" --gtest_brief=1 &
  done
  wait
  # The emulator is one thread: its two samples run side by side.
  GTEST_TOTAL_SHARDS=16 GTEST_SHARD_INDEX=0 run "$out/emulator_matrix.log" "$out/bin/tessera_emulator_tests" \
    --gtest_brief=1 --gtest_filter='Cuda/EmulatedMatrix.*' &
  run "$out/emulator.log" "$out/bin/tessera_emulator_tests" --gtest_brief=1 \
    --gtest_filter='Emulator.*:FlashAttentionCuda.EmulatorMatchesTheReference:SparseCuda.*InTheEmulator' &
  wait
  logs=("$out/shard0.log" "$out/shard1.log" "$out/emulator_matrix.log" "$out/emulator.log")
else
  filter='ThreadPool.*:KernelCache.*:RuntimeCache.*:DiskCache.*:TuningRecords.*:GemmNumerics.ThreadCountDoesNotChangeResults'
  filter+=':Spmm.ThreadsAndIsas:Attention.BothIsasAndThreadCounts'
  run "$out/run.log" "$out/bin/tessera_threaded_tests" --gtest_brief=1 --gtest_filter="$filter"
  logs=("$out/run.log")
fi
for log in "${logs[@]}"; do
  status=$(cat "$log.status" 2>/dev/null || echo "none")
  if [[ $status != 0 ]]; then
    failed=1
    echo "FAIL: $(basename "$log" .log) exited with status $status; the end of its log:"
    tail -n 25 "$log"
  fi
  if grep -q -E "ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|WARNING: ThreadSanitizer" "$log"; then
    failed=1
    echo "FAIL: sanitizer report in $log:"
    grep -m5 -A12 -E "ERROR: |runtime error:|WARNING: ThreadSanitizer" "$log"
  fi
  grep -E "^\[  (PASSED|FAILED)  \]|tests ran" "$log"
done
echo "ran in $(($(date +%s) - start)) s"
[[ $failed -eq 0 ]]
