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

# Zero extents: M, N or batch 0 is a no-op and K = 0 writes epilogue(0, C), verified; never a signal.
for args in "0 5 5" "5 0 5" "5 5 0 --beta 0.5" "5 5 5 --batch 0" "0 0 0 --threads 2" \
  "0 7 9 --layout-a col --epilogue relu(acc+bias[n])" "70 300 0 --epilogue relu(acc+bias[n])+beta*c --beta 2"; do
  # shellcheck disable=SC2086
  if "$bin" gemm $args --repeat 1 --verify >/dev/null 2>&1; then ok; else bad "gemm $args (zero extent): exit $?"; fi
done

# Epilogues with comparisons, selects and inf: CPU and the emulator, verified against the reference.
for target in "cpu" "cuda-emu:sm_80 --dtype f16"; do
  for epi in "acc > 0 ? acc : 0.1*acc" "acc < bias[n] ? -inf : min(acc, inf)"; do
    # shellcheck disable=SC2086
    if "$bin" gemm 65 63 17 --target $target --epilogue "$epi" --repeat 1 --verify >/dev/null 2>&1; then ok; else
      bad "gemm --target $target --epilogue '$epi' --verify"; fi
  done
done

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
expect_bad "must be a value, not a condition" gemm 10 10 10 --epilogue "acc > 0"

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

# CUDA: emit prints the source, the PTX and a JSON resource report; without a GPU, gemm says why and exits 3.
src=$("$bin" emit gemm 256 256 256 --target cuda:sm_80 --dtype f16 --epilogue "relu(acc + bias[n])")
if [[ $src == *'#include "tessera/gemm/gemm_tensorop.cuh"'* && $src == *"tessera::epi::relu("* ]]; then ok; else
  bad "emit gemm --target cuda source"; fi
if "$bin" emit gemm 256 256 256 --target cuda:sm_90 --dtype bf16 --ptx | grep -q "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"; then ok; else
  bad "emit gemm --ptx lacks bf16 mma.sync"; fi
# int8: emitted for both VNNI widths on any host (AVX-VNNI's VEX ymm form too); run and verified where the host has it.
if "$bin" emit gemm 64 96 130 --dtype i8 --target cpu:avx2+vnni --asm | grep -qE "\{vex\}\s*vpdpbusd\s+%ymm"; then ok; else
  bad "emit gemm --dtype i8 --target cpu:avx2+vnni lacks VEX vpdpbusd"; fi
if "$bin" emit gemm 64 96 130 --dtype i8 --target cpu:avx512+vnni --config amx=0 --asm | grep -qE "vpdpbusd\s+%zmm"; then ok; else
  bad "emit gemm --dtype i8 --target cpu:avx512+vnni lacks zmm vpdpbusd"; fi
expect_bad "unknown extension 'amx2'" emit gemm 64 64 64 --target cpu:avx512+amx2
expect_bad "bf16 or amx on cpu:avx512" emit gemm 64 64 64 --target cpu:avx2+amx
if "$bin" emit gemm 64 96 130 --dtype i8 --target cpu:avx512+amx --asm | grep -qE "tdpbusd\s+%tmm"; then ok; else
  bad "emit gemm --dtype i8 --target cpu:avx512+amx lacks tdpbusd"; fi
expect_bad "--out-dtype" gemm 10 10 10 --out-dtype f16
# D rounded to bf16 from an f32 GEMM, by rows and by columns.
for layout in row col; do
  if "$bin" gemm 50 61 70 --out-dtype bf16 --layout-c $layout --verify >/dev/null; then ok; else
    bad "gemm --out-dtype bf16 --layout-c $layout --verify: exit $?"; fi
done
if grep -q avx512_vnni /proc/cpuinfo && grep -q avx512f /proc/cpuinfo; then
  if "$bin" gemm 67 301 133 --dtype i8 --epilogue "scale[n] * acc + bias[n]" --verify >/dev/null; then ok; else
    bad "gemm --dtype i8 --verify: exit $?"; fi
  if "$bin" gemm 67 301 133 --dtype i8 --out-dtype i8 --epilogue "scale[n] * acc" --layout-c col --verify >/dev/null; then ok; else
    bad "gemm --dtype i8 --out-dtype i8 --verify: exit $?"; fi
else
  echo "SKIP: gemm --dtype i8 --verify (host lacks avx512_vnni)"
fi
report=$("$bin" emit gemm 1024 1024 1024 --target cuda:sm_90 --dtype f16 --layout-b col --json)
code=$?
if [[ $code -eq 0 && $(printf '%s\n' "$report" | wc -l) -eq 1 && $report == *'"spill_store_bytes":0'* && $report == *'"local_access_count":0'* ]]; then ok; else
  bad "emit --json: exit $code: $report"; fi
for field in name arch registers shared_bytes spill_store_bytes spill_load_bytes stack_bytes compile_ms mma_count \
  ldmatrix_count cp_async_count local_access_count; do
  if [[ $report == *"\"$field\":"* ]]; then ok; else bad "emit --json lacks $field"; fi
done
expect_bad "stages (7) must be in 2..5" emit gemm 64 64 64 --target cuda:sm_80 --dtype f16 --config stages=7
expect_bad "f32 inputs need simt math" emit gemm 64 64 64 --target cuda:sm_80 --config simt=0
expect_bad "unknown CUDA target" emit gemm 64 64 64 --target cuda:sm_75
expect_bad "--asm" emit gemm 64 64 64 --target cuda:sm_80 --asm
expect_unavailable() {
  local needle=$1
  shift
  local err code
  err=$("$@" 2>&1 >/dev/null)
  code=$?
  if [[ $code -eq 3 && $err == *"$needle"* ]]; then ok; else bad "$* → exit $code, stderr: $err"; fi
}
if [[ ! -e /dev/nvidia0 ]]; then
  expect_unavailable "CUDA driver" "$bin" gemm 128 128 128 --target cuda:sm_80 --dtype f16 --verify
  if [[ -e /usr/local/cuda/lib64/stubs/libcuda.so ]]; then
    expect_unavailable "stub library" env TESSERA_CUDA_DRIVER=/usr/local/cuda/lib64/stubs/libcuda.so \
      "$bin" gemm 128 128 128 --target cuda:sm_80 --dtype f16
  fi
fi

# AMX: a host without it refuses the target naming what it lacks; the tile kernel emulated runs anywhere with
# AVX-512 VNNI and is verified.
if ! grep -qw amx_tile /proc/cpuinfo; then
  expect_unavailable "AMX unavailable: the CPU lacks amx_tile" "$bin" gemm 64 64 64 --dtype i8 --target cpu:amx
fi
if grep -qw avx512_vnni /proc/cpuinfo; then
  out=$("$bin" gemm 77 50 203 --dtype i8 --config amx=2,mr=32,nr=32,kc=128 --verify --json --repeat 1)
  if [[ $? -eq 0 && $out == *'"ok":true'* && $out == *'_amxemu_'* ]]; then ok; else bad "gemm --config amx=2: $out"; fi
fi

# The same CUDA kernels in the SIMT emulator: verified against the reference.
out=$("$bin" gemm 129 127 255 --target cuda-emu:sm_80 --dtype f16 --layout-b col --epilogue "gelu(alpha*acc + bias[n])" --verify --json --repeat 1)
if [[ $? -eq 0 && $out == *'"ok":true'* && $out == *'"target":"cuda-emu:sm_80"'* ]]; then ok; else bad "gemm --target cuda-emu: $out"; fi
for dtype in bf16 tf32 f32; do
  if "$bin" gemm 65 33 17 --target cuda-emu:sm_90 --dtype $dtype --verify --repeat 1 >/dev/null; then ok; else
    bad "gemm --target cuda-emu:sm_90 --dtype $dtype"; fi
done
# The emulator as a profiler: the default kernel's main loop and epilogue without bank conflicts; a CPU target is
# refused for --profile.
out=$("$bin" gemm 256 256 256 --target cuda-emu:sm_80 --dtype f16 --profile --json --repeat 1)
if [[ $? -eq 0 ]] && python3 -c '
import json, sys
p = json.loads(sys.argv[1])["profile"]
assert all(p[k]["requests"] > 0 and p[k]["bank_conflicts"] == 0 for k in ("ldmatrix", "cp_async_shared", "shared_load", "shared_store")), p
assert p["cp_async_global"]["sectors"] == p["cp_async_global"]["ideal_sectors"], p
' "$out"; then ok; else bad "gemm --profile: $out"; fi
expect_bad "--profile" gemm 64 64 64 --profile
out=$("$bin" attention 1 2 128 64 --target cuda-emu:sm_80 --dtype f16 --profile --verify --json --repeat 1)
if [[ $? -eq 0 ]] && python3 -c '
import json, sys
j = json.loads(sys.argv[1]); p = j["profile"]
assert j["ok"] and all(p[k]["requests"] > 0 and p[k]["bank_conflicts"] == 0 for k in ("ldmatrix", "cp_async_shared")), p
' "$out"; then ok; else bad "attention --profile: $out"; fi
expect_bad "--profile" attention 1 1 8 8 --profile
# The Hopper kernel (TMA, wgmma): its O staging free of bank conflicts, its stores whole sectors; --config reaches it.
out=$("$bin" attention 1 2 256 64 --target cuda-emu:sm_90a --dtype f16 --profile --verify --json --repeat 1)
if [[ $? -eq 0 ]] && python3 -c '
import json, sys
j = json.loads(sys.argv[1]); p = j["profile"]
assert j["ok"] and "wgmma" in j["name"], j["name"]
assert all(p[k]["requests"] > 0 and p[k]["bank_conflicts"] == 0 for k in ("shared_load", "shared_store")), p
assert p["global_store"]["sectors"] == p["global_store"]["ideal_sectors"], p
' "$out"; then ok; else bad "attention sm_90a --profile: $out"; fi
out=$("$bin" emit attention 1 2 128 128 --dtype bf16 --target cuda:sm_90a --config block_kv=64,warps=4 --json)
if [[ $out == *'"block_kv":64'* && $out == *'"warps":4'* && $out == *'"spill_store_bytes":0'* ]]; then ok; else
  bad "emit attention sm_90a --config: $out"; fi
expect_bad "unknown key 'blk'" emit attention 1 2 128 128 --dtype f16 --target cuda:sm_90a --config blk=3
expect_bad "wgmma attention kernel needs sm_90a" emit attention 1 2 128 64 --dtype f16 --target cuda:sm_80 --config wgmma=1

# Tuning: records a few shapes, resumes without measuring again, trains and evaluates a model from the records.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if "$bin" tune gemm --shapes 48x48x48,8x256x128,100x60x70,33x17x65,96x96x32,1x128x64 --top-k 4 \
  --records "$tmp/r.sqlite" --sample-ms 0.2 --samples 3 >"$tmp/tune.txt" 2>/dev/null &&
  [[ $(grep -c ' best ' "$tmp/tune.txt") -eq 6 ]]; then ok; else bad "tune gemm: $(cat "$tmp/tune.txt")"; fi
if "$bin" tune gemm --shapes 48x48x48 --top-k 4 --records "$tmp/r.sqlite" 2>/dev/null | grep -q "(0 new)"; then ok; else
  bad "tune gemm did not resume from its records"; fi
if "$bin" model train --records "$tmp/r.sqlite" --out "$tmp/m.json" --rounds 10 --slowdown-rounds 10 >/dev/null 2>&1 && [[ -s $tmp/m.json ]]; then
  ok; else bad "model train"; fi
expect_bad "--slowdown-rounds: must be at least 1" model train --records "$tmp/r.sqlite" --out "$tmp/m0.json" \
  --slowdown-rounds 0
expect_bad "--near-best-weight: must be a finite number" model eval --records "$tmp/r.sqlite" --near-best-weight -1
expect_bad "--parallel-trees: must be at least 1" model train --records "$tmp/r.sqlite" --out "$tmp/m0.json" \
  --parallel-trees 0
[[ ! -e $tmp/m0.json ]] && ok || bad "a refused model train left a file"
ev=$("$bin" model eval --records "$tmp/r.sqlite" --split random --rounds 10 --slowdown-rounds 10 --json 2>/dev/null)
for field in learned analytic default noise_floor problems split top1_regret_mean top1_regret_p90 top1_regret_max \
  top5_score kendall_tau measurements_to_98 measurements_to_99; do
  if [[ $ev == *"\"$field\":"* ]]; then ok; else bad "model eval --json lacks $field: $ev"; fi
done
if "$bin" gemm 40 50 60 --verify --repeat 1 >/dev/null; then ok; else bad "gemm with the shipped cost model"; fi
if "$bin" tune gemm --shapes 4096x4096x4096 --target cuda:sm_80 --dtype f16 --top-k 3 2>&1 | grep -q "ranked by the analytic model"; then
  ok; else bad "tune gemm --target cuda does not say that the analytic model ranks"; fi
# Training and evaluating read the records without writing them: a version-2 file (as committed) stays as it was.
if command -v sqlite3 >/dev/null; then
  sqlite3 "$tmp/v2.sqlite" "CREATE TABLE tessera_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO tessera_meta VALUES('schema_version', '2');
    CREATE TABLE measurements(id INTEGER PRIMARY KEY, spec_hash TEXT NOT NULL, family TEXT NOT NULL,
      m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL, batch INTEGER NOT NULL, signature TEXT NOT NULL,
      config TEXT NOT NULL, target TEXT NOT NULL, hardware TEXT NOT NULL, threads INTEGER NOT NULL,
      median_ns REAL NOT NULL, spread REAL NOT NULL, samples INTEGER NOT NULL, tessera_version TEXT NOT NULL,
      measured_at TEXT NOT NULL, b_cold INTEGER NOT NULL DEFAULT 0);"
  sqlite3 "$tmp/v2.sqlite" "ATTACH '$tmp/r.sqlite' AS r; INSERT INTO measurements(spec_hash, family, m, n, k, batch,
    signature, config, target, hardware, threads, median_ns, spread, samples, tessera_version, measured_at, b_cold)
    SELECT spec_hash, family, json_extract(problem, '\$.m'), json_extract(problem, '\$.n'),
    json_extract(problem, '\$.k'), json_extract(problem, '\$.batch'), signature, config, target, hardware, threads,
    median_ns, spread, samples, tessera_version, measured_at, b_cold FROM r.measurements WHERE op = 'gemm';"
  sum_before=$(sha256sum "$tmp/v2.sqlite")
  a=$("$bin" model eval --records "$tmp/v2.sqlite" --split random --rounds 10 --slowdown-rounds 10 --json 2>&1)
  b=$("$bin" model eval --records "$tmp/r.sqlite" --split random --rounds 10 --slowdown-rounds 10 --json 2>&1)
  # The same records give the same evaluation (only the time to rank differs).
  a=$(sed -E 's/"ranking_ms_[a-z]+":[0-9.e+-]+,//g' <<<"$a") b=$(sed -E 's/"ranking_ms_[a-z]+":[0-9.e+-]+,//g' <<<"$b")
  if [[ $(sha256sum "$tmp/v2.sqlite") == "$sum_before" && $a == *'"learned":'* && $a == "$b" ]]; then ok; else
    bad "model eval of a version-2 file: changed it, or read it otherwise than version 3: $a / $b"; fi
fi
# The runtime's own choice held out: a tiny run's report, its first timing recorded; bad options named.
out=$("$bin" model holdout --shapes 1 --skinny-share 0 --max-dim 16 --samples 1 --sample-ms 0.05 \
  --records "$tmp/holdout.sqlite" --json)
for field in runtime runtime_retest default analytic learned noise_floor paths regret_by_path problems \
  excluded_shapes; do
  if [[ $out == *"\"$field\":"* ]]; then ok; else bad "model holdout --json lacks $field: $out"; fi
done
if [[ $(sqlite3 "$tmp/holdout.sqlite" "SELECT count(*) > 1 FROM measurements WHERE family = 'holdout-general'") == 1 ]]
then ok; else bad "model holdout --records kept nothing"; fi
expect_bad "--shapes: must be at least 1" model holdout --shapes 0
expect_bad "--skinny-share" model holdout --skinny-share 2
expect_bad "is not a directory" model holdout --exclude-suites "$tmp/none"
# The sparse ops' holdout: a tiny SDDMM run recorded under its pattern kind; the drawn SpMM cases leave the suite's.
out=$("$bin" model holdout --op sddmm --shapes 1 --max-macs 100000 --samples 1 --sample-ms 0.05 \
  --records "$tmp/holdout.sqlite" --json)
for field in runtime runtime_retest analytic noise_floor by_kind cases excluded_cases; do
  if [[ $out == *"\"$field\":"* ]]; then ok; else bad "model holdout --op sddmm --json lacks $field: $out"; fi
done
if [[ $(sqlite3 "$tmp/holdout.sqlite" "SELECT count(*) > 1 FROM measurements WHERE op = 'sddmm' AND family LIKE 'holdout-%'") == 1 ]]
then ok; else bad "model holdout --op sddmm --records kept nothing"; fi
drawn=$("$bin" model holdout --op spmm --shapes 50 --list-shapes | grep -v '^#')
if [[ $(wc -l <<<"$drawn") == 50 ]] && ! grep -qxF -f <(grep -v '^#' "$(dirname "$readme")/bench/suites/spmm.txt" | awk '{print $1, $2}') <<<"$drawn"
then ok; else bad "model holdout --op spmm --list-shapes: not 50 cases outside the suite: $drawn"; fi
# A suite's cases are never drawn: with a suite holding the first case drawn above, the same seed draws 50 without it.
mkdir -p "$tmp/spmm_suite" && head -1 <<<"$drawn" >"$tmp/spmm_suite/spmm.txt"
again=$("$bin" model holdout --op spmm --shapes 50 --list-shapes --exclude-suites "$tmp/spmm_suite")
if [[ $(grep -vc '^#' <<<"$again") == 50 && $again == *"(1 suite cases excluded)"* ]] &&
  ! grep -qxF "$(head -1 <<<"$drawn")" <<<"$again"; then ok; else
  bad "model holdout --op spmm --exclude-suites: the suite's case drawn again: $again"; fi
expect_bad "--op: 'bogus': expected gemm, spmm, sddmm or attention" model holdout --op bogus
# Calibration: shapes timed here and a model trained on them, kept where the runtime's default model looks first
# (this host's file in the cache directory), and used there: the verbose log names it.
if out=$(TESSERA_CACHE_DIR="$tmp/calcache" "$bin" model calibrate --shapes 3 --skinny-share 0 --max-dim 40 \
  --base-records none --json 2>&1) && [[ $out == *'"problems":3'* ]] &&
  model=$(sed -E 's/.*"model":"([^"]*)".*/\1/' <<<"$out") && [[ $model == "$tmp/calcache/models/"*.json && -s $model ]]
then ok; else bad "model calibrate: $out"; fi
# One of the shapes it timed (the same draw, no suite excluded): inside the model's range.
mkdir -p "$tmp/nosuites"
shape=$("$bin" model holdout --shapes 3 --skinny-share 0 --max-dim 40 --seed 1000001 --exclude-suites "$tmp/nosuites" \
  --list-shapes | grep -v '^#' | head -1)
out=$(TESSERA_CACHE_DIR="$tmp/calcache" TESSERA_VERBOSE=1 "$bin" gemm $shape --verify 2>&1)
[[ $out == *"choice=model:calibrated"* && $out == *"verify: ok"* ]] && ok || bad "the calibrated model unused: $shape: $out"
out=$(TESSERA_VERBOSE=1 "$bin" gemm $shape 2>&1)
[[ $out != *"calibrated"* ]] && ok || bad "another cache directory's calibration used: $out"
expect_bad "no such file" model calibrate --base-records "$tmp/none.sqlite"
expect_bad "at least two machines" model eval --records "$tmp/r.sqlite" --split host
# Several records files are one training set, merged as `tune merge` merges them; the model names its files, and
# calibrating it trains on them beside this host's shapes.
"$bin" tune merge "$tmp/r.sqlite" "$tmp/holdout.sqlite" --out "$tmp/two_runs.sqlite" >/dev/null
a=$("$bin" model eval --records "$tmp/r.sqlite" "$tmp/holdout.sqlite" --split random --rounds 10 --slowdown-rounds 10 \
  --json 2>&1)
b=$("$bin" model eval --records "$tmp/two_runs.sqlite" --split random --rounds 10 --slowdown-rounds 10 --json 2>&1)
a=$(sed -E 's/"ranking_ms_[a-z]+":[0-9.e+-]+,//g' <<<"$a") b=$(sed -E 's/"ranking_ms_[a-z]+":[0-9.e+-]+,//g' <<<"$b")
[[ $a == *'"learned":'* && $a == "$b" ]] && ok || bad "model eval of two records files is not that of their merge: $a / $b"
"$bin" model train --records "$tmp/r.sqlite" "$tmp/holdout.sqlite" --out "$tmp/m2.json" --rounds 10 \
  --slowdown-rounds 10 >/dev/null
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["trained_on"] == ["r.sqlite", "holdout.sqlite"]' \
  "$tmp/m2.json" && ok || bad "the model does not name the records it was trained on"
expect_bad "no such file '$tmp/none.sqlite'" model train --records "$tmp/r.sqlite" "$tmp/none.sqlite" --out "$tmp/m3.json"
[[ ! -e $tmp/m3.json ]] && ok || bad "a refused model train left a file"
# (Few boosting rounds: what is checked is which records it trains on, and the full training takes 14 s.)
out=$(TESSERA_CACHE_DIR="$tmp/calcache2" "$bin" model calibrate --shapes 1 --skinny-share 0 --max-dim 24 --rounds 10 \
  --slowdown-rounds 10 --json 2>&1)
shipped=$(python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1])).get("trained_on", [])))' \
  "$(dirname "$0")/../models/cpu_avx512_fma2.json")
if [[ $("$bin" model calibrate --help) == *"shipped model was trained on"* ]]; then ok; else bad "calibrate --help"; fi
if python3 -c '
import json, os, sys
report, shipped = json.loads(sys.argv[1]), sys.argv[2].split()
names = [os.path.basename(p) for p in report["base_records"]]
assert report["base_measurements"] > 0 and names, report
# On a host whose shipped model names its records, calibration trains on exactly those.
assert not shipped or report["model"].find("fma2") < 0 or names == shipped, (names, shipped)
' "$out" "$shipped"; then ok; else bad "model calibrate did not train on the shipped model's records: $out"; fi
# A records row with malformed JSON is named, not a crash (model train, eval and features).
cp "$tmp/r.sqlite" "$tmp/damaged.sqlite"
if command -v sqlite3 >/dev/null && sqlite3 "$tmp/damaged.sqlite" "UPDATE measurements SET signature = '{' WHERE rowid = 1"; then
  expect_bad "malformed signature" model eval --records "$tmp/damaged.sqlite" --rounds 10 --slowdown-rounds 10
  expect_bad "malformed signature" model train --records "$tmp/damaged.sqlite" --out "$tmp/m2.json" --rounds 10 \
    --slowdown-rounds 10
  expect_bad "malformed signature" model features --records "$tmp/damaged.sqlite" --out "$tmp/f.csv"
  sqlite3 "$tmp/damaged.sqlite" "UPDATE measurements SET signature = '{}' WHERE rowid = 1"
  expect_bad "does not describe a GEMM" model eval --records "$tmp/damaged.sqlite" --rounds 10 --slowdown-rounds 10
else
  bad "sqlite3 could not damage a copy of the records"
fi
# A damaged emulator library in the cache (truncated, one byte changed) is detected by its digest and rebuilt.
cache=$(mktemp -d)
if TESSERA_CACHE_DIR=$cache "$bin" gemm 40 24 16 --target cuda-emu:sm_80 --dtype f16 --repeat 1 --verify >/dev/null; then
  ok
else bad "emulator kernel into a fresh cache"; fi
lib=$(find "$cache/emu" -name 'gemm_*.so' | head -1)
if [[ -n $lib ]]; then
  truncate -s 4096 "$lib"
  if TESSERA_CACHE_DIR=$cache "$bin" gemm 40 24 16 --target cuda-emu:sm_80 --dtype f16 --repeat 1 --verify >/dev/null
  then ok; else bad "a truncated cached library: exit $?"; fi
  printf '\xff' | dd of="$lib" bs=1 seek=2000 conv=notrunc 2>/dev/null
  if TESSERA_CACHE_DIR=$cache "$bin" gemm 40 24 16 --target cuda-emu:sm_80 --dtype f16 --repeat 1 --verify >/dev/null
  then ok; else bad "a changed cached library: exit $?"; fi
  if [[ $(cat "$lib.xxh3" 2>/dev/null) =~ ^[0-9a-f]{32}$ ]]; then ok; else bad "no digest beside $lib"; fi
else bad "no cached emulator library under $cache"; fi
rm -rf "$cache"
# A kernel cache that cannot be used (a file where its folder should be): exit 3 with the reason, not an abort.
cache=$(mktemp -d)
touch "$cache/emu"
err=$(TESSERA_CACHE_DIR=$cache "$bin" gemm 64 64 64 --target cuda-emu:sm_80 --dtype f16 2>&1 >/dev/null)
code=$?
if [[ $code -eq 3 && $err == *"kernel cache"*"cannot be used"* ]]; then ok; else bad "unusable cache: exit $code, $err"; fi
rm -rf "$cache"
echo "not a database" >"$tmp/bad.sqlite"
expect_bad "is not an SQLite database" tune gemm --shapes 8x8x8 --records "$tmp/bad.sqlite"
if [[ $(cat "$tmp/bad.sqlite") == "not a database" ]]; then ok; else bad "a rejected records file was modified"; fi
# The records as CSV: a header and one row per measurement, whose last column is the recorded time.
if "$bin" model features --records "$tmp/r.sqlite" --out "$tmp/f.csv" &&
  [[ $(($(wc -l <"$tmp/f.csv") - 1)) -eq $(sqlite3 "$tmp/r.sqlite" "select count(*) from measurements") ]] &&
  [[ $(head -1 "$tmp/f.csv") == problem,family,m,n,k,batch,config,log_m,*,ns ]]; then ok; else bad "model features"; fi
# A second run of two of the shapes: the retest noise floor covers exactly those.
"$bin" tune gemm --shapes 48x48x48,8x256x128 --top-k 4 --records "$tmp/r2.sqlite" --sample-ms 0.2 --samples 3 >/dev/null 2>&1
ev=$("$bin" model eval --records "$tmp/r.sqlite" --retest "$tmp/r2.sqlite" --rounds 10 --slowdown-rounds 10 --json 2>/dev/null)
if [[ $ev == *'"retest":{'*'"problems":2'* ]]; then ok; else bad "model eval --retest: $ev"; fi
expect_bad "no such file" model eval --records "$tmp/r.sqlite" --retest "$tmp/none.sqlite"
# Scoring only some families: all six shapes are of the family "list".
ev=$("$bin" model eval --records "$tmp/r.sqlite" --families list,other --rounds 10 --slowdown-rounds 10 --json 2>/dev/null)
if [[ $ev == *'"scored_problems":6'* ]]; then ok; else bad "model eval --families: $ev"; fi
expect_bad "none of the records belongs to these families" model eval --records "$tmp/r.sqlite" --families nope
expect_bad "not in range" tune gemm --shapes 8x8x8 --samples 0
# Refinement: every contender (all are within 1000% of the best) gets 4 samples more than the 3 of every round.
"$bin" tune gemm --shapes 48x48x48 --top-k 4 --records "$tmp/r3.sqlite" --sample-ms 0.2 --samples 3 \
  --refine-samples 4 --refine-within 10 >/dev/null 2>&1
counts=$(sqlite3 "$tmp/r3.sqlite" "select group_concat(distinct samples) from measurements where samples > 1")
if [[ $counts == 7 ]]; then ok; else bad "tune gemm --refine-samples: sample counts $counts"; fi
expect_bad "not in range" tune gemm --shapes 8x8x8 --refine-samples -1
# Merging runs: r.sqlite and r2.sqlite share the measurements of two shapes; each merged one is the mean of the two
# runs' medians (an even count), the others are kept as they were.
if "$bin" tune merge "$tmp/r.sqlite" "$tmp/r2.sqlite" --out "$tmp/merged.sqlite" >/dev/null &&
  [[ $(sqlite3 "$tmp/merged.sqlite" "attach '$tmp/r.sqlite' as a; attach '$tmp/r2.sqlite' as b;
    select count(*) from measurements x join a.measurements p using(spec_hash, op, problem, threads, hardware, b_cold)
    left join b.measurements q using(spec_hash, op, problem, threads, hardware, b_cold)
    where abs(x.median_ns - coalesce((p.median_ns + q.median_ns) / 2, p.median_ns)) > 1e-6 * p.median_ns
      or x.samples != p.samples + coalesce(q.samples, 0)") == 0 ]] &&
  [[ $(sqlite3 "$tmp/merged.sqlite" "select count(*) from measurements") -eq \
     $(sqlite3 "$tmp/r.sqlite" "select count(*) from measurements") ]]; then ok; else bad "tune merge"; fi
expect_bad "exists: merge into a new file" tune merge "$tmp/r.sqlite" "$tmp/r2.sqlite" --out "$tmp/merged.sqlite"
expect_bad "is not a file" tune merge "$tmp/r.sqlite" "$tmp/none.sqlite" --out "$tmp/m2.sqlite"
expect_bad "at least two runs" tune merge "$tmp/r.sqlite" --out "$tmp/m2.sqlite"
if [[ ! -e $tmp/none.sqlite && ! -e $tmp/m2.sqlite ]]; then ok; else bad "a refused merge left a file behind"; fi
# A suite's family may ask for B evicted before each call: its measurements are recorded as such, apart from the
# others (the same shape twice, once per family, is two measurements of each variant).
printf '# family: warm\n24 256 64\n# family: weights b-cold\n24 256 64\n' >"$tmp/cold.txt"
"$bin" tune gemm --suite "$tmp/cold.txt" --top-k 2 --records "$tmp/cold.sqlite" --sample-ms 0.2 --samples 3 >"$tmp/cold.out" 2>/dev/null
if [[ $(sqlite3 "$tmp/cold.sqlite" "select group_concat(family || ':' || b_cold || ':' || n, ' ') from
    (select family, b_cold, count(*) n from measurements group by family, b_cold order by family)") == "warm:0:2 weights:1:2" ]] &&
  grep -q "\[weights, B cold\]" "$tmp/cold.out"; then ok; else bad "b-cold family: $(cat "$tmp/cold.out")"; fi
# A family may name its column-major operands: its problems are tuned and recorded in those layouts, the next
# family's in the default (row-major) ones.
printf '# family: linear b-col\n24 256 64\n# family: plain\n24 256 64\n' >"$tmp/layouts.txt"
"$bin" tune gemm --suite "$tmp/layouts.txt" --top-k 2 --records "$tmp/layouts.sqlite" --sample-ms 0.2 --samples 3 >/dev/null 2>&1
if [[ $(sqlite3 "$tmp/layouts.sqlite" "select group_concat(family || ':' || b || ':' || n, ' ') from
    (select family, instr(signature, '\"b\":{\"dtype\":\"f32\",\"layout\":\"col\"}') > 0 b, count(*) n
     from measurements group by family, b order by family)") == "linear:1:2 plain:0:2" ]]; then ok
else bad "b-col family: $(sqlite3 "$tmp/layouts.sqlite" "select family, signature from measurements")"; fi
# One row of a column-major A is a row-major A to the runtime (unit strides both ways): tuned and recorded as such
# (compiled as asked, its first call was refused).
if "$bin" tune gemm --shapes 1x256x64 --layout-a col --top-k 2 --records "$tmp/onerow.sqlite" --sample-ms 0.2 --samples 3 \
    >"$tmp/onerow.out" 2>&1 && grep -q "gemm_f32_rrzr" "$tmp/onerow.out" &&
  [[ $(sqlite3 "$tmp/onerow.sqlite" "select count(*) from measurements
       where instr(signature, '\"a\":{\"dtype\":\"f32\",\"layout\":\"row\"}') > 0") -eq 2 ]]; then ok
else bad "one-row column-major A: $(cat "$tmp/onerow.out")"; fi
printf '# family: weights b-hot\n24 256 64\n' >"$tmp/badattr.txt"
expect_bad "unknown family attribute 'b-hot'" tune gemm --suite "$tmp/badattr.txt" --top-k 1
expect_bad "must be random, family or host" model eval --records "$tmp/r.sqlite" --split sideways
expect_bad "no such file" model eval --records "$tmp/none.sqlite"

# The demo verifies its kernels and exits 0.
# Issue 37, item 7: NaN where the reference has NaN verifies; an empty --epilogue is an error as in the API; a missing
# host compiler leaves no temporary file in the cache; a read-only records database is refused before any tuning.
if "$bin" gemm 5 5 5 --alpha nan --verify --repeat 1 >/dev/null; then ok; else bad "gemm --alpha nan --verify: exit $?"; fi
expect_bad "epilogue" gemm 10 10 10 --epilogue ""
nocxx=$(mktemp -d)
TESSERA_HOST_CXX=/nonexistent TESSERA_CACHE_DIR=$nocxx "$bin" gemm 40 24 16 --target cuda-emu:sm_80 --dtype f16 \
  --repeat 1 >/dev/null 2>&1
code=$?
leftover=$(find "$nocxx" -name 'tmp-*' | head -3)
if [[ $code -eq 3 && -z $leftover ]]; then ok; else bad "missing host compiler: exit $code, left: $leftover"; fi
rm -rf "$nocxx"
readonly_dir=$(mktemp -d)
"$bin" tune gemm --shapes 8x8x8 --top-k 1 --records "$readonly_dir/r.db" >/dev/null 2>&1
if chattr +i "$readonly_dir/r.db" 2>/dev/null; then
  err=$("$bin" tune gemm --shapes 16x16x16 --top-k 1 --records "$readonly_dir/r.db" 2>&1 >/dev/null)
  code=$?
  chattr -i "$readonly_dir/r.db"
  if [[ $code -eq 2 && $err == *"read-only"* ]]; then ok; else bad "read-only records: exit $code: $err"; fi
else
  echo "SKIP: read-only records (chattr +i needs root)"
fi
rm -rf "$readonly_dir"
# A kernel cache directory the user may not write (run as nobody, where permissions bite; as root they do not): the
# kernel is built and run in memory, the warning is printed once, nothing is created. A suite run by another user
# checks as that user.
perm=$(mktemp -d)
chmod 755 "$perm"
mkdir "$perm/ro"
cp "$bin" "$perm/tessera"
chmod 555 "$perm/ro"
as_user=()
[[ $(id -u) -eq 0 ]] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
out=$(cd / && TESSERA_CACHE_DIR=$perm/ro/kernels "${as_user[@]}" "$perm/tessera" gemm 33 17 9 --verify --json \
  2>"$perm/err")
code=$?
warnings=$(grep -c "cannot be used" "$perm/err")
if [[ $code -eq 0 && $out == *'"ok":true'* && $out == *'"cache":"built"'* && $warnings -eq 1 &&
  -z $(ls -A "$perm/ro") ]]; then ok; else
  bad "unwritable cache directory: exit $code, $warnings warnings, $(cat "$perm/err") $(ls -A "$perm/ro")"; fi
chmod 755 "$perm/ro"
rm -rf "$perm"

# Attention: --json keys, verified runs (causal, GQA, varlen with an empty sequence, modifiers, both ISAs), and bad
# arguments (exit 2 naming the argument, or 3 for the CUDA target not built yet).
out=$("$bin" attention 2 4 100 64 --kv-heads 2 --causal --lse --verify --json --repeat 1)
code=$?
if [[ $code -eq 0 && $out == \{*\} && $out == *'"ok":true'* ]]; then ok; else bad "attention --json: exit $code: $out"; fi
for field in name spec_hash compile_ms median_ms gflops max_abs_err max_rel_err ok batch heads kv_heads seq_q seq_kv \
  head_dim causal workspace_bytes; do
  if [[ $out == *"\"$field\":"* ]]; then ok; else bad "attention --json lacks $field"; fi
done
for args in "1 2 65 128 --layout bhsd" "1 2 127 64 --seq-kv 300 --causal --target cpu:avx2" \
  "0 4 0 64 --kv-heads 1 --seq-lens 100,0,37 --seq-lens-kv 50,10,0 --causal" \
  "1 2 90 32 --score-mod 30*tanh(s/30)" "1 2 90 32 --score-mod s+bias[h,i-j+100] --tensor bias=2x200" \
  "1 2 90 32 --causal --score-mod j<i-8?-inf:s*t --scalar t=0.5" "1 1 7 3 --head-dim-v 5 --threads 1"; do
  # shellcheck disable=SC2086
  if "$bin" attention $args --repeat 1 --verify >/dev/null 2>&1; then ok; else bad "attention $args: exit $?"; fi
done
if "$bin" emit attention 1 1 64 64 --causal --asm | grep -q vfmadd; then ok; else bad "emit attention --asm"; fi
out=$("$bin" tune attention 1 2 200 64 --causal --top-k 2 --samples 2 --json)
if [[ $out == *'"measured":[{'* && $out == *'"best":'* ]]; then ok; else bad "tune attention --json: $out"; fi
# Attention and sparse tunings record into the GEMM records database, keyed by op and problem, and resume from it.
"$bin" tune attention 1 2 120 32 --causal --top-k 2 --samples 2 --records "$tmp/r.sqlite" --family test >/dev/null
"$bin" tune spmm --gen uniform:200,150,0.05,3 --n 16 --top-k 2 --samples 2 --records "$tmp/r.sqlite" >/dev/null
"$bin" tune sddmm --gen uniform:200,150,0.05,3 --k 16 --top-k 2 --samples 2 --records "$tmp/r.sqlite" >/dev/null
if "$bin" tune attention 1 2 120 32 --causal --top-k 2 --samples 2 --records "$tmp/r.sqlite" | grep -q ", 0 new" &&
  "$bin" tune spmm --gen uniform:200,150,0.05,3 --n 16 --top-k 2 --samples 2 --records "$tmp/r.sqlite" |
  grep -q ", 0 new"; then ok; else bad "tune attention|spmm did not resume from the records"; fi
if "$bin" tune spmm --gen uniform:200,150,0.05,4 --n 16 --top-k 2 --samples 2 --records "$tmp/r.sqlite" |
  grep -q ", 2 new"; then ok; else bad "another pattern of the same sizes was taken from the records"; fi
if command -v sqlite3 >/dev/null; then
  ops=$(sqlite3 "$tmp/r.sqlite" "SELECT op || ':' || count(*) FROM measurements GROUP BY op ORDER BY op" | tr '\n' ' ')
  if [[ $ops == "attention:2 gemm:"*" sddmm:2 spmm:4 " ]]; then ok; else bad "records by op: $ops"; fi
fi
expect_bad "k: heads of q (3)" attention 1 3 10 64 --kv-heads 2
expect_bad "column 4" attention 1 2 10 64 --score-mod "s +* 2"
expect_bad "tensors[bias]" attention 1 2 100 64 --score-mod "s + bias[h, i - j]" --tensor bias=2x120
expect_bad "score_mod: reads scalar 't'" attention 1 2 10 64 --score-mod "s*t"
expect_bad "--dtype" attention 1 2 10 64 --dtype f16
if "$bin" attention 1 4 200 64 --kv-heads 2 --causal --dtype bf16 --repeat 1 --verify >/dev/null; then ok; else
  bad "attention --dtype bf16 --verify: exit $?"; fi
expect_bad "--seq-lens-kv" attention 0 2 0 64 --seq-lens 3,4 --seq-lens-kv 5
expect_bad "D" attention 1 2 10 0
expect_bad "block_q" attention 1 2 10 64 --config block_q=7
# CUDA attention: in the emulator against the reference, its resources from NVRTC, and what it cannot do yet.
for args in "2 4 100 64 --kv-heads 2 --causal --lse --dtype f16" "1 2 70 128 --seq-kv 33 --causal --dtype bf16 --layout bhsd"; do
  # shellcheck disable=SC2086
  if "$bin" attention $args --target cuda-emu:sm_80 --repeat 1 --verify >/dev/null; then ok; else
    bad "attention $args --target cuda-emu:sm_80: exit $?"; fi
done
# Decoding: few query blocks split their keys across the grid (flash-decoding), the splits' rows merged by the LSE.
out=$("$bin" attention 1 8 1 64 --kv-heads 2 --seq-kv 1500 --lse --dtype bf16 --target cuda-emu:sm_80 --repeat 1 \
  --verify --json)
if [[ $out == *'"ok":true'* && $out =~ \"kv_splits\":([0-9]+) && ${BASH_REMATCH[1]} -gt 1 &&
  $out != *'"workspace_bytes":0,'* && $out == *'"stacked_heads":true'* ]]; then ok; else
  bad "CUDA decoding with split keys and stacked heads: $out"; fi
out=$("$bin" emit attention 1 8 4096 128 --causal --dtype f16 --target cuda:sm_90 --json)
for field in registers shared_bytes spill_store_bytes mma_count ldmatrix_count cp_async_count local_access_count; do
  if [[ $out == *"\"$field\":"* ]]; then ok; else bad "emit attention --json lacks $field: $out"; fi
done
if [[ $out == *'"spill_store_bytes":0'* && $out == *'"local_access_count":0'* ]]; then ok; else bad "attention spills: $out"; fi
expect_bad "head_dim 32, 64, 96 or 128" attention 1 2 64 80 --target cuda-emu:sm_80 --dtype f16
if "$bin" attention 1 2 64 64 --target cuda-emu:sm_80 --dtype f16 --score-mod "s - slope[h]*(i - j)" \
  --tensor slope=2 --causal --repeat 1 --verify >/dev/null; then ok; else bad "CUDA attention with a modifier: exit $?"; fi
if "$bin" attention 0 4 0 64 --kv-heads 2 --seq-lens 50,0,17 --seq-lens-kv 30,8,0 --causal --lse --dtype bf16 \
  --target cuda-emu:sm_80 --repeat 1 --verify >/dev/null; then ok; else bad "CUDA varlen attention: exit $?"; fi
expect_bad "f16 or bf16" attention 1 2 64 64 --target cuda-emu:sm_80
if "$bin" attention 1 2 10 64 --dtype f16 --target cuda:sm_80 >/dev/null 2>&1; then bad "attention ran on a GPU"; else
  [[ $? -eq 3 ]] && ok || bad "attention --target cuda:sm_80: exit $?"; fi

# Sparse: SpMM and SDDMM verified on the CPU (CSR and BSR, epilogues) and in the emulator; --json keys; the same
# matrix written to a .mtx and read back gives bitwise the same D; malformed files and patterns are named.
out=$("$bin" spmm --gen powerlaw:3000,2000,0.002,3 --n 70 --epilogue "relu(acc + bias[n])" --verify --json --repeat 1)
code=$?
if [[ $code -eq 0 && $out == \{*\} && $out == *'"ok":true'* ]]; then ok; else bad "spmm --json: exit $code: $out"; fi
for field in name spec_hash m k n nnz format compile_ms median_ms gflops gbytes_per_s max_abs_err ok; do
  if [[ $out == *"\"$field\":"* ]]; then ok; else bad "spmm --json lacks $field"; fi
done
for args in "--gen blocks:96,80,0.3,1,8 --n 33 --format bsr:8x8" "--gen uniform:50,60,0.1,2 --n 17 --index i64 --dtype bf16" \
  "--gen banded:200,200,0.05 --n 5 --beta 0.5 --epilogue alpha*acc+beta*c --threads 1"; do
  # shellcheck disable=SC2086
  if "$bin" spmm $args --repeat 1 --verify >/dev/null; then ok; else bad "spmm $args: exit $?"; fi
done
out=$("$bin" sddmm --gen uniform:300,400,0.02,1 --k 64 --epilogue "acc / sqrt(64) + s" --verify --json --repeat 1)
if [[ $out == *'"ok":true'* && $out == *'"gbytes_per_s":'* ]]; then ok; else bad "sddmm --json: $out"; fi
for target in "cuda-emu:sm_80 --dtype f16" "cuda-emu:sm_90 --dtype bf16"; do
  # shellcheck disable=SC2086
  if "$bin" spmm --gen powerlaw:500,400,0.01,2 --n 40 --target $target --repeat 1 --verify >/dev/null &&
    "$bin" sddmm --gen uniform:100,90,0.05,2 --k 70 --epilogue "acc * s" --target $target --repeat 1 --verify >/dev/null; then
    ok
  else bad "sparse --target $target: exit $?"; fi
done
if "$bin" spmm --gen blocks:100,90,0.3,1,16 --n 40 --format bsr:16x16 --dtype f16 --target cuda-emu:sm_80 --repeat 1 \
  --verify >/dev/null; then ok; else bad "BSR spmm on mma.sync in the emulator: exit $?"; fi
out=$("$bin" emit spmm --gen blocks:64,64,0.3,1,16 --n 64 --format bsr:16x16 --dtype bf16 --target cuda:sm_80 --json)
if [[ $out == *'"mma_count":'* && $out != *'"mma_count":0'* && $out == *'"spill_store_bytes":0'* ]]; then ok; else
  bad "emit spmm bsr --json: $out"; fi
expect_bad "csr or bsr:16x16" spmm --gen uniform:64,64,0.1 --n 8 --format bsr:4x4 --target cuda-emu:sm_80
mtx=$(mktemp --suffix=.mtx)
a=$("$bin" spmm --gen uniform:120,90,0.05,4 --n 8 --write-matrix "$mtx" --json --repeat 1 --verify)
b=$("$bin" spmm --matrix "$mtx" --n 8 --json --repeat 1 --verify)
nnz_a=$(grep -o '"nnz":[0-9]*' <<<"$a") nnz_b=$(grep -o '"nnz":[0-9]*' <<<"$b")
if [[ $a == *'"ok":true'* && $b == *'"ok":true'* && -n $nnz_a && $nnz_a == "$nnz_b" ]]; then ok; else
  bad "mtx round trip: $a / $b"; fi
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n4 1 2.0\n' >"$mtx"
expect_bad ":4: entry (4, 1) lies outside" spmm --matrix "$mtx" --n 8
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 5\n1 1 1.0\n' >"$mtx"
expect_bad "ends after 1 of the 5" spmm --matrix "$mtx" --n 8
rm -f "$mtx"
expect_bad "--matrix/--gen" spmm --n 8
expect_bad "gen: 'uniform:10,10'" spmm --gen uniform:10,10 --n 8
expect_bad "--format" spmm --gen uniform:10,10,0.1 --n 8 --format bsr:0x4
expect_bad "sampled" sddmm --gen uniform:10,10,0.1 --k 8 --epilogue "acc + c"
expect_bad "unknown key" spmm --gen uniform:10,10,0.1 --n 8 --config mr=3
if "$bin" emit spmm --gen uniform:64,64,0.1 --n 64 --asm | grep -q vfmadd; then ok; else bad "emit spmm --asm"; fi
# Emitting allocates D as M×N, not M×K: a 100000² pattern with N = 64 (once 40 GB and "out of memory").
if "$bin" emit spmm --gen banded:100000,100000,0.0002 --n 64 --format csr --asm | grep -q vfmadd; then ok; else
  bad "emit spmm of a wide pattern"; fi
out=$("$bin" emit sddmm --gen uniform:64,64,0.1 --k 64 --dtype f16 --target cuda:sm_90 --json)
if [[ $out == *'"spill_store_bytes":0'* && $out == *'"local_access_count":0'* && $out == *'"registers":'* ]]; then ok; else
  bad "emit sddmm --json: $out"; fi
if "$bin" spmm --gen uniform:64,64,0.1 --n 8 --target cuda:sm_80 >/dev/null 2>&1; then bad "spmm ran on a GPU"; else
  [[ $? -eq 3 ]] && ok || bad "spmm --target cuda:sm_80: exit $?"; fi

# The disk cache: a second process takes the kernel from disk, two processes at once both get whole kernels, a
# damaged entry is found by verify and rebuilt, TESSERA_CACHE=0 writes nothing, an unusable folder warns once.
kc=$(mktemp -d)
cache_of() { sed -n 's/.*"cache":"\([a-z]*\)".*/\1/p' <<<"$1"; }
out=$(TESSERA_CACHE_DIR=$kc "$bin" gemm 45 51 23 --repeat 1 --verify --json)
if [[ $(cache_of "$out") == built && $out == *'"ok":true'* ]]; then ok; else bad "cache: first run not built: $out"; fi
out=$(TESSERA_CACHE_DIR=$kc "$bin" gemm 45 51 23 --repeat 1 --verify --json)
if [[ $(cache_of "$out") == disk && $out == *'"ok":true'* ]]; then ok; else bad "cache: second run not from disk: $out"; fi
TESSERA_CACHE_DIR=$kc "$bin" gemm 47 53 29 --repeat 1 --verify --json >"$kc/p1" 2>&1 &
TESSERA_CACHE_DIR=$kc "$bin" gemm 47 53 29 --repeat 1 --verify --json >"$kc/p2" 2>&1 &
wait
if [[ $(cat "$kc/p1") == *'"ok":true'* && $(cat "$kc/p2") == *'"ok":true'* ]]; then ok; else
  bad "cache: two processes at once: $(cat "$kc/p1" "$kc/p2")"; fi
if [[ $(TESSERA_CACHE_DIR=$kc "$bin" cache stats --json) == *'"entries":2'* ]]; then ok; else
  bad "cache stats: $(TESSERA_CACHE_DIR=$kc "$bin" cache stats --json)"; fi
entry=$(find "$kc/kernels" -name '*.kernel' | head -1)
printf 'garbage' | dd of="$entry" bs=1 seek=300 conv=notrunc status=none
out=$(TESSERA_CACHE_DIR=$kc "$bin" cache verify)
if [[ $? -eq 1 && $out == *"1 intact, 1 removed"* && $out == *"checksum"* ]]; then ok; else bad "cache verify: $out"; fi
if [[ $(TESSERA_CACHE_DIR=$kc "$bin" cache list) == *gemm_f32* ]]; then ok; else bad "cache list"; fi
if [[ $(TESSERA_CACHE_DIR=$kc "$bin" cache clear) == "removed 1 entries"* ]] &&
  [[ -z $(find "$kc/kernels" -name '*.kernel') ]]; then ok; else bad "cache clear"; fi
out=$(TESSERA_CACHE=0 TESSERA_CACHE_DIR=$kc "$bin" gemm 45 51 23 --repeat 1 --json)
if [[ $(cache_of "$out") == built && -z $(find "$kc/kernels" -name '*.kernel') ]]; then ok; else
  bad "TESSERA_CACHE=0 wrote or read the cache: $out"; fi
touch "$kc/file"
err=$(TESSERA_CACHE_DIR=$kc/file "$bin" gemm 45 51 23 --repeat 1 --verify 2>&1 >/dev/null)
code=$?
if [[ $code -eq 0 && $(grep -c "kept in memory only" <<<"$err") -eq 1 ]]; then ok; else
  bad "unusable cache folder: exit $code, stderr: $err"; fi
expect_bad "subcommand" cache
rm -rf "$kc"

# TESSERA_VERBOSE=1: one line per kernel obtained (shape, kernel, how chosen, where from); TESSERA_DUMP=DIR: the IR and
# assembly (CPU), the CUDA source and PTX, of every kernel built.
err=$(TESSERA_VERBOSE=1 TESSERA_CACHE=0 "$bin" gemm 33 44 55 --epilogue "relu(acc)" --repeat 1 2>&1 >/dev/null)
if [[ $(grep -c '^tessera: gemm,kernel,' <<<"$err") -eq 1 && $err == *"33x44x55x1,f32:rr->r,epilogue=relu(acc),gemm_f32_"* &&
  $err == *",choice="* && $err == *",cache=built,compile_ms="* ]]; then ok; else bad "TESSERA_VERBOSE=1: $err"; fi
err=$(TESSERA_VERBOSE=1 "$bin" gemm 33 44 55 --epilogue "relu(acc)" --repeat 1 --config pack_b=1 2>&1 >/dev/null)
[[ $err == *"choice=given"* ]] && ok || bad "TESSERA_VERBOSE=1 with --config: $err"
# Attention, SpMM and SDDMM kernels are logged alike.
err=$(TESSERA_VERBOSE=1 TESSERA_CACHE=0 "$bin" attention 2 8 100 64 --kv-heads 2 --causal --repeat 1 2>&1 >/dev/null)
if [[ $err == "tessera: attention,kernel,2x8/2x100x100,d=64/64,f32,causal,score_mod=s,attention_"* &&
  $err == *",choice=rules,cache=built,compile_ms="* ]]; then ok; else bad "TESSERA_VERBOSE=1 attention: $err"; fi
err=$(TESSERA_VERBOSE=1 TESSERA_CACHE=0 "$bin" spmm --gen uniform:500,400,0.05 --n 64 --repeat 1 2>&1 >/dev/null)
if [[ $err == "tessera: spmm,kernel,500x400x64,csr_i32_f32,nnz="*",spmm_csr_"*",choice=rules,cache=built,"* ]]; then ok
else bad "TESSERA_VERBOSE=1 spmm: $err"; fi
err=$(TESSERA_VERBOSE=1 TESSERA_CACHE=0 "$bin" sddmm --gen uniform:500,400,0.05 --k 32 --repeat 1 2>&1 >/dev/null)
if [[ $err == "tessera: sddmm,kernel,500x400x32,csr_i32_f32,nnz="*",sddmm_csr_"*",choice=rules,cache=built,"* ]]; then ok
else bad "TESSERA_VERBOSE=1 sddmm: $err"; fi
dump=$(mktemp -d)
TESSERA_DUMP=$dump "$bin" gemm 35 45 55 --repeat 1 >/dev/null 2>&1
if grep -q "define" "$dump"/gemm_f32_*.ll && grep -q "vfmadd" "$dump"/gemm_f32_*.s; then ok; else
  bad "TESSERA_DUMP (CPU): $(ls "$dump")"; fi
TESSERA_DUMP=$dump "$bin" emit gemm 64 64 64 --target cuda:sm_80 --dtype f16 --ptx >/dev/null 2>&1
if grep -q "__global__" "$dump"/*sm_80.cu && grep -q "mma.sync" "$dump"/*sm_80.ptx; then ok; else
  bad "TESSERA_DUMP (CUDA): $(ls "$dump")"; fi
rm -rf "$dump"
# TESSERA_PERF_MAP=1: each function of a kernel built (the entry and its internal routines) in perf's map of the
# process, /tmp/perf-PID.map, as "ADDRESS SIZE NAME" in hex, the entry named as the JSON names the kernel.
json_out=$(mktemp)
marker=$(mktemp)
TESSERA_PERF_MAP=1 TESSERA_CACHE=0 "$bin" attention 1 8 1 128 --kv-heads 2 --seq-kv 300 --repeat 1 --json >"$json_out" 2>/dev/null
name=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['name'])" "$json_out" 2>/dev/null)
maps=$(find /tmp -maxdepth 1 -name 'perf-*.map' -newer "$marker")
if [[ -n $name && -n $maps ]] && grep -Eq "^[0-9a-f]+ [1-9a-f][0-9a-f]* $name\$" $maps &&
  grep -Eq "^[0-9a-f]+ [1-9a-f][0-9a-f]* ([a-z0-9_]+\.)?pack_k\$" $maps; then ok; else
  bad "TESSERA_PERF_MAP=1 ($name): $maps: $(cat $maps 2>&1)"; fi
rm -f "$json_out" "$marker" $maps
[[ $("$bin" --version) == "tessera "* ]] && ok || bad "--version"
# Under --json an error is also one JSON object on stdout.
out=$("$bin" gemm 10 10 --json 2>/dev/null)
[[ $? -eq 2 && $out == '{"error":"K is required","exit":2,"ok":false}' ]] && ok || bad "--json error: $out"
out=$("$bin" gemm 10 10 10 --epilogue "gelu(acc" --json 2>/dev/null)
[[ $out == *'"error":"--epilogue: column 9'*'"exit":2'* ]] && ok || bad "--json epilogue error: $out"

# The bad-input table (issue 37): one row per case, NEEDLE<tab>ARGUMENTS (shell words); each must exit 2 with one
# line on stderr holding NEEDLE, and write nothing (no library directory, no matrix file).
printf 'garbage\n' >"$tmp/garbage.mtx"
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 1\n4 1 1.0\n' >"$tmp/range.mtx"
printf '{\n' >"$tmp/bad.json"
table_rows=0
while IFS=$'\t' read -r needle words; do
  eval "args=($words)"
  expect_bad "$needle" "${args[@]}"
  table_rows=$((table_rows + 1))
done <<ROWS
--dtype	gemm 10 10 10 --dtype f64
--dtype	gemm 10 10 10 --dtype ""
--alpha	gemm 10 10 10 --alpha abc
--beta	gemm 10 10 10 --beta 1,2
--layout-c	gemm 10 10 10 --layout-c diag
--epilogue: column 1	gemm 10 10 10 --epilogue ""
--repeat	gemm 10 10 10 --repeat -3
MR (0)	gemm 10 10 10 --config mr=0
unknown key 'bogus'	gemm 10 10 10 --config bogus=1
key=integer	gemm 10 10 10 --config mr
not expected	gemm 10 10 10 10
M/N/K	gemm -1 10 10
unknown target 'cpu:avx1024'	gemm 10 10 10 --target cpu:avx1024
--epilogue	gemm 10 10 10 --epilogue "acc + bias[q]"
--epilogue	gemm 10 10 10 --epilogue "relu(acc, 1)"
--epilogue	gemm 10 10 10 --epilogue "((((acc)))"
--epilogue	gemm 10 10 10 --epilogue "acc × 2"
M/N/K: this command allocates at most 2^31	gemm 10 10 99999999999999999999
--kv-heads	attention 1 2 16 64 --kv-heads 0
--kv-heads	attention 1 2 16 64 --kv-heads -2
--seq-kv	attention 1 2 16 64 --seq-kv -5
B/H/S	attention 1 2 -16 64
B/H/S	attention -1 2 16 64
D: must be in [1, 512]	attention 1 2 16 513
--head-dim-v	attention 1 2 16 64 --head-dim-v -1
--head-dim-v	attention 1 2 16 64 --head-dim-v 1000
score_mod: column 4	attention 1 2 16 64 --score-mod "s +"
score_mod: reads tensor 'bias'	attention 1 2 16 64 --score-mod "s + bias[h]"
tensors[bias]: must have rank 1	attention 1 2 16 64 --score-mod "s + bias[h]" --tensor bias=3x3
--scalar t	attention 1 2 16 64 --score-mod "s * t" --scalar t=abc
scalars[t]: is not read	attention 1 2 16 64 --scalar t=1
--tensor bias	attention 1 2 16 64 --tensor bias=x
--dtype	attention 1 2 16 64 --dtype i8
scale: must be finite	attention 1 2 16 64 --scale nan
scale: must be finite	attention 1 2 16 64 --scale inf
--threads	attention 1 2 16 64 --threads -4
--seq-lens	attention 1 2 16 64 --seq-lens 4,-1
--layout	attention 1 2 16 64 --layout sbhd
block_q = 0	attention 1 2 16 64 --config block_q=0
unknown key 'nope'	attention 1 2 16 64 --config nope=3
--repeat	attention 1 2 16 64 --repeat 0
unknown CUDA target	attention 1 2 16 64 --target cuda-emu:sm_70
B/H/S/D	attention 1024 1024 1024 512
Could not convert	attention x 2 16 64
cannot be opened	spmm --matrix $tmp/nonexistent.mtx --n 16
the first line must start with %%MatrixMarket	spmm --matrix $tmp/garbage.mtx --n 16
density '2'	spmm --gen uniform:10,10,2 --n 16
unknown kind 'zipf'	spmm --gen zipf:10,10,0.5 --n 16
--n	spmm --gen uniform:10,10,0.5 --n -16
--format	spmm --gen uniform:10,10,0.5 --n 16 --format ell
--epilogue: column 6	spmm --gen uniform:10,10,0.5 --n 16 --epilogue "acc +"
--index	spmm --gen uniform:10,10,0.5 --n 16 --index i16
--dtype	spmm --gen uniform:10,10,0.5 --n 16 --dtype f64
nv must be in 1..8	spmm --gen uniform:10,10,0.5 --n 16 --config nv=99
cannot be written	spmm --gen uniform:10,10,0.5 --n 16 --write-matrix /nonexistent/x.mtx
--matrix/--gen	spmm --gen uniform:10,10,0.5 --matrix $tmp/range.mtx --n 16
--k	sddmm --gen uniform:10,10,0.5 --k -8
the first line must start	sddmm --matrix $tmp/garbage.mtx --k 8
's' is reserved	sddmm --gen uniform:10,10,0.5 --k 8 --epilogue "s[n]"
--index	sddmm --gen uniform:10,10,0.5 --k 8 --index i8
--dtype	sddmm --gen uniform:10,10,0.5 --k 8 --dtype i8
unknown key	sddmm --gen uniform:10,10,0.5 --k 8 --config bogus=1
--shapes 10x10	tune gemm --shapes 10x10
'axbxc' is not MxNxK	tune gemm --shapes axbxc
--records: cannot open	tune gemm --shapes 10x10x10 --records /nonexistent/dir/r.db
--records: no such file	model eval --records /nonexistent.db
subcommand	model bogus
subcommand	library bogus
not expected	cache clear --dir
manifest: JSON: invalid	library build $tmp/bad.json --out $tmp/libout1
MANIFEST: cannot read	library build /nonexistent.json --out $tmp/libout2
not expected	emit gemm 10 10 10 10
unknown target 'cpu:avx3'	emit attention 1 2 16 64 --target cpu:avx3
--dtype	emit spmm --gen uniform:10,10,0.5 --n 16 --dtype f64
--n: this command allocates at most 2^31	spmm --gen uniform:10,10,0.5 --n 9223372036854775807
--k: this command allocates at most 2^31	sddmm --gen uniform:10,10,0.5 --k 9223372036854775807
--n: this command allocates at most 2^31	emit spmm --gen uniform:10,10,0.5 --n 9223372036854775807
ROWS
if [[ $table_rows -ge 70 && ! -e $tmp/libout1 && ! -e $tmp/libout2 ]]; then ok; else
  bad "bad-input table: $table_rows rows, or a refused library build left its directory"; fi

if demo=$("$bin" demo --threads 1) && [[ $(grep -c ' ok$' <<<"$demo") -eq 4 ]]; then ok; else bad "demo: $demo"; fi

# Every command-line example in README.md and docs/guide.md runs and succeeds.
examples=0
while IFS= read -r line; do
  command=${line%%#*}
  command=${command/build\/bin\//$bindir/}
  examples=$((examples + 1))
  if [[ $line == *avx512_bf16* ]] && ! grep -qw avx512_bf16 /proc/cpuinfo; then
    # A host without vdpbf16ps refuses the bf16 example with an error that says why.
    if out=$(eval "$command" 2>&1); then bad "README example ran bf16 without avx512_bf16: $line"
    elif [[ $out == *"needs avx512_bf16"* ]]; then ok; else bad "README example: $line: $out"; fi
    continue
  fi
  if [[ $line == *"--dtype i8"* && $line != *" emit "* ]] && ! grep -qwE 'avx_vnni|avx512_vnni' /proc/cpuinfo; then
    # A host without VNNI refuses to run the int8 example (emitting is for any host) with an error that says why.
    if out=$(eval "$command" 2>&1); then bad "README example ran int8 without VNNI: $line"
    elif [[ $out == *"needs avx_vnni"* || $out == *"needs avx512_vnni"* ]]; then ok; else bad "README example: $line: $out"; fi
    continue
  fi
  # From the repository's root, where the examples' relative paths (examples/kernels.json, build/...) point.
  if (cd "$(dirname "$readme")" && eval "$command") >/dev/null 2>&1; then ok; else bad "README example: $line"; fi
done < <(grep -hE '^build/bin/' "$readme" "$(dirname "$readme")/docs/guide.md")
if [[ $examples -ge 20 ]]; then ok; else bad "found only $examples README and guide command examples"; fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
