#!/usr/bin/env bash
# The tessera command: the README's command-line examples, --json output, and bad arguments
# (exit code 2 and a one-line error naming the argument, never a crash).
set -u
bin=${1:?usage: cli_test.sh path/to/tessera path/to/README.md}
readme=${2:?usage: cli_test.sh path/to/tessera path/to/README.md}
bindir=$(dirname "$bin")
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

# A valid run prints exactly one JSON object with "ok": true.
out=$("$bin" gemm 509 77 1031 --layout-a col --epilogue "silu(alpha*acc + bias[n])" --verify --json)
code=$?
lines=$(printf '%s\n' "$out" | wc -l)
if [[ $code -eq 0 && $lines -eq 1 && $out == \{*\} && $out == *'"ok":true'* && $out == *'"spec_hash":"'* ]]; then ok; else
  bad "gemm --json: exit $code, output: $out"; fi
for field in name spec_hash m n k batch compile_ms median_ms gflops max_abs_err max_rel_err ok; do
  if [[ $out == *"\"$field\":"* ]]; then ok; else bad "gemm --json lacks $field"; fi
done

# Batched, column-major C/D, beta, fused residual: verified.
if "$bin" gemm 33 65 17 --batch 3 --layout-b col --layout-c col --beta 0.5 --alpha 2 \
  --epilogue "alpha*acc + beta*c + residual[m,n]" --threads 1 --repeat 1 --verify >/dev/null; then ok; else
  bad "batched gemm --verify"; fi
if "$bin" gemm 100 37 1 --target cpu:avx2 --verify --repeat 1 >/dev/null; then ok; else bad "avx2 gemm --verify"; fi

# Bad arguments: exit 2, exactly one line on stderr that names the argument.
expect_bad() {
  local needle=$1
  shift
  local err code
  err=$("$bin" "$@" 2>&1 >/dev/null)
  code=$?
  if [[ $code -eq 2 && $(printf '%s\n' "$err" | wc -l) -eq 1 && $err == *"$needle"* ]]; then ok; else
    bad "tessera $* → exit $code, stderr: $err"; fi
}
expect_bad "K" gemm 10 10
expect_bad "M" gemm abc 10 10
expect_bad "M/N/K" gemm 10 10 -5
expect_bad "--layout-a" gemm 10 10 10 --layout-a diagonal
expect_bad "column 9" gemm 10 10 10 --epilogue "gelu(acc"
expect_bad "unknown name 'foo'" gemm 10 10 10 --epilogue "acc + foo"
expect_bad "--threads" gemm 10 10 10 --threads -1
expect_bad "target" gemm 10 10 10 --target gpu
expect_bad "--repeat" gemm 10 10 10 --repeat 0
expect_bad "--batch" gemm 10 10 10 --batch -2
expect_bad "ir_opt_level" gemm 10 10 10 --ir-opt 7
expect_bad "--layout-b" emit gemm 10 10 10 --layout-b x
expect_bad "subcommand" bogus
expect_bad "2^31" gemm 100000 100000 100000

# emit: LLVM IR, and assembly with the ISA's widest FMAs.
ir=$("$bin" emit gemm 64 64 64 --epilogue "gelu(acc)")
if [[ $ir == *"define void @gemm_f32_rrzr_"* && $ir == *"llvm.fma.v"* ]]; then ok; else bad "emit gemm IR"; fi
if grep -q avx512f /proc/cpuinfo; then
  asm=$("$bin" emit gemm 64 64 64 --asm)
  if [[ $(grep -cE 'vfmadd[0-9]+ps.*%zmm' <<<"$asm") -ge 16 ]]; then ok; else bad "emit --asm shows no 512-bit FMAs"; fi
fi
asm2=$("$bin" emit gemm 64 64 64 --asm --target cpu:avx2)
if [[ $(grep -cE 'vfmadd[0-9]+ps.*%ymm' <<<"$asm2") -ge 12 && $(grep -c '%zmm' <<<"$asm2") -eq 0 ]]; then ok; else
  bad "emit --asm --target cpu:avx2"; fi

# The demo verifies its kernels and exits 0.
if demo=$("$bin" demo --threads 1) && [[ $(grep -c ' ok$' <<<"$demo") -eq 4 ]]; then ok; else bad "demo: $demo"; fi

# Every command-line example in README.md runs and succeeds.
examples=0
while IFS= read -r line; do
  command=${line%%#*}
  command=${command/build\/bin\//$bindir/}
  examples=$((examples + 1))
  if eval "$command" >/dev/null 2>&1; then ok; else bad "README example: $line"; fi
done < <(grep -E '^build/bin/' "$readme")
if [[ $examples -ge 4 ]]; then ok; else bad "found only $examples README command examples"; fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
