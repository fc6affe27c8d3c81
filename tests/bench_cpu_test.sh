#!/usr/bin/env bash
# tessera-bench on the CPU over every layout pair: each peer computes the same product on the same buffers and the
# benchmark exits 1 if one disagrees with tessera, so four independent libraries check tessera's transposed paths
# (edge shapes, a batch). Bad --layouts must be a clear error (exit 2) that writes no JSON.
set -u
bench=${1:?usage: bench_cpu_test.sh path/to/tessera-bench}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bench" gemm --shapes 37x70x45,130x33x300x3 --layouts rr,rc,cr,cc --peers onednn,openblas,blis,eigen \
  --threads 1,2 --repeat 3 --sample-ms 1 --settle-ms 0 --json "$tmp/out.json" >"$tmp/log" 2>&1 ||
  fail "exit $?: $(cat "$tmp/log")"
python3 - "$tmp/out.json" <<'PY' || fail "report: $(cat "$tmp/log")"
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
assert len(rows) == 2 * 4 * 2, len(rows)
assert {r["layouts"] for r in rows} == {"rr", "rc", "cr", "cc"}
for r in rows:
    compared = [p for p in r["peers"].values() if "agrees_with_tessera" in p]
    assert len(compared) >= 3, r["shape"]
    assert all(p["agrees_with_tessera"] for p in compared), r["shape"]
    assert r["shape"].endswith(":" + r["layouts"]) == (r["layouts"] != "rr"), r["shape"]
    # The paired ratio: per peer, the median over rounds of tessera / that peer; the lowest of them.
    ours = r["peers"]["tessera"]["samples_gflops"]
    paired = {}
    for name, p in r["peers"].items():
        if name == "tessera" or "samples_gflops" not in p:
            continue
        ratios = sorted(a / b for a, b in zip(ours, p["samples_gflops"]))
        paired[name] = ratios[len(ratios) // 2]
    worst = min(paired, key=paired.get)
    assert abs(r["paired_ratio"] - paired[worst]) < 1e-9 * paired[worst], (r["shape"], r["paired_ratio"], paired)
    assert r["paired_peer"] == worst, (r["shape"], r["paired_peer"], paired)
PY

# B cold before every timed call: the same agreement check, and the option recorded with the results.
"$bench" gemm --shapes 33x200x70 --cold-b --peers openblas,eigen --threads 1 --repeat 2 --sample-ms 1 --settle-ms 0 \
  --json "$tmp/cold.json" >"$tmp/log" 2>&1 || fail "--cold-b exit $?: $(cat "$tmp/log")"
python3 - "$tmp/cold.json" <<'PY' || fail "--cold-b report: $(cat "$tmp/log")"
import json, sys
report = json.load(open(sys.argv[1]))
assert "--cold-b" in report["command"], report["command"]
(row,) = report["results"]
assert all(p["agrees_with_tessera"] for p in row["peers"].values() if "agrees_with_tessera" in p), row
assert row["peers"]["tessera"]["median_gflops"] > 0, row
PY
out=$("$bench" gemm --shapes 64x64x64 --cold-b --target cuda --peers cublas --json "$tmp/cold_cuda.json" 2>&1)
code=$?
[[ $code -eq 2 && $out == *"--cold-b"* && ! -e $tmp/cold_cuda.json ]] || fail "--cold-b on CUDA: exit $code, $out"

out=$("$bench" gemm --shapes 64x64x64 --layouts rt --peers none --json "$tmp/bad.json" 2>&1)
code=$?
[[ $code -eq 2 && $out == *"--layouts"* && ! -e $tmp/bad.json ]] || fail "bad --layouts: exit $code, $out"
echo ok
