#!/usr/bin/env bash
# The resource report of tessera's main CUDA GEMM configs, as NVRTC + ptxas see them (no GPU needed):
# registers, shared memory, spills, PTX instruction counts and compile time. Writes bench/results/cuda_resources.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin/tessera
out=bench/results/cuda_resources.json
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
  echo "["
  first=1
  for arch in sm_80 sm_90; do
    for spec in \
      "f16 row col 4096 4096 4096 -" \
      "bf16 row row 4096 4096 4096 -" \
      "tf32 row col 4096 4096 4096 -" \
      "f32 row row 4096 4096 4096 -" \
      "f16 row row 4096 4096 4096 block_m=128,block_n=256,warp_m=64,warp_n=64,stages=3" \
      "f16 col row 4096 4096 4096 block_m=256,block_n=128,warp_m=64,warp_n=64,stages=3" \
      "f16 row col 512 512 512 -" \
      "f16 row col 64 64 8192 -"; do
      read -r dtype la lb m n k config <<<"$spec"
      [[ $config == - ]] && config=""
      row=$("$bin" emit gemm "$m" "$n" "$k" --target "cuda:$arch" --dtype "$dtype" --layout-a "$la" --layout-b "$lb" \
        --config "$config" --json)
      [[ $first -eq 1 ]] || echo ","
      first=0
      printf '{"m":%s,"n":%s,"k":%s,"dtype":"%s","layout":"%s%s","report":%s}' "$m" "$n" "$k" "$dtype" "${la:0:1}" "${lb:0:1}" "$row"
    done
  done
  echo "]"
} >"$tmp"
python3 -m json.tool "$tmp" >/dev/null
mv "$tmp" "$out"
trap - EXIT
python3 - "$out" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print("| arch | dtype | A,B | shape | kernel tile | threads | regs | smem (B) | spills | mma | ldmatrix | cp.async | local | main loop: mma, other | compile ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    j = r["report"]; c = j["config"]
    tile = f'{c["math"]} {c["block_m"]}x{c["block_n"]}x{c["block_k"]} w{c["warp_m"]}x{c["warp_n"]} s{c["stages"]}' + (f' sk{c["split_k"]}' if c["split_k"] > 1 else "")
    print(f'| {j["arch"]} | {r["dtype"]} | {r["layout"]} | {r["m"]}x{r["n"]}x{r["k"]} | {tile} | {j["threads"]} | {j["registers"]} | {j["shared_bytes"]} | {j["spill_store_bytes"]}/{j["spill_load_bytes"]} | {j["mma_count"]} | {j["ldmatrix_count"]} | {j["cp_async_count"]} | {j["local_access_count"]} | {j["main_loop_mma"]}, {j["main_loop_other"]} | {j["compile_ms"]:.0f} |')
PY
