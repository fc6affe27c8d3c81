#!/usr/bin/env bash
# Runs every CPU benchmark suite against the peers and writes bench/results/*.json and *.svg (about 35 minutes).
# Usage: bash bench/run_all.sh [build dir] [output dir]; run it on an otherwise idle machine. The bf16 suite runs
# where the host has avx512_bf16.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build}/bin/tessera-bench
out=${2:-bench/results}
mkdir -p "$out"
for suite in square small skinny rectangular odd; do
  "$bin" gemm --suite "$suite" --threads 1,2 --repeat 7 --json "$out/gemm_$suite.json" --svg "$out/gemm_$suite.svg"
done
# Weights as inference reads them: B evicted from the caches before every call, for every library (the warm runs
# above leave B in whatever the previous library left in the L3).
"$bin" gemm --suite skinny --cold-b --threads 1,2 --repeat 7 --json "$out/gemm_skinny_cold_b.json" \
  --svg "$out/gemm_skinny_cold_b.svg"
"$bin" gemm --suite linear --layouts rc --peers onednn,openblas,blis,eigen --cold-b --threads 1,2 --repeat 7 \
  --json "$out/gemm_linear_cold_b.json" --svg "$out/gemm_linear_cold_b.svg"
"$bin" gemm --suite linear --layouts rc --peers onednn,openblas,blis,eigen --threads 1,2 --repeat 7 \
  --json "$out/gemm_linear.json" --svg "$out/gemm_linear.svg"
"$bin" gemm --suite layouts --layouts rc,cr,cc --peers onednn,openblas,blis,eigen --threads 1,2 --repeat 7 \
  --json "$out/gemm_layouts.json" --svg "$out/gemm_layouts.svg"
if grep -qw avx512_bf16 /proc/cpuinfo; then
  "$bin" gemm --suite square --dtype bf16 --peers onednn --threads 1,2 --repeat 7 \
    --json "$out/gemm_bf16_square.json" --svg "$out/gemm_bf16_square.svg"
fi
"$bin" fusion --shapes 512x512x512,1024x1024x1024,2048x2048x2048 --threads 1,2 --repeat 7 --json "$out/fusion.json"
