#include "ops/attention/key_chunks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "generator/core/arith.hpp"

namespace tessera {

namespace {
// Bytes of K and V rows one chunk may span when each key's row lies on its own page: the 4 KiB pages of 2 MiB fit
// any current x86 core's second-level TLB (1.5-3k entries) together with the rest of the call's working set.
constexpr std::int64_t kTlbReachBytes = std::int64_t{2} << 20;
constexpr std::int64_t kPageBytes = 4096;
}  // namespace

std::int64_t key_chunk_length(const AttentionBinding& bound, const CpuAttentionConfig& config, std::int64_t blocks,
                              int participants) {
  if (!config.in_place || blocks <= 0) return 0;
  const AttentionProblem& p = bound.problem;
  std::int64_t longest = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) longest = std::max(longest, p.kv_len(b));
  std::int64_t chunk = longest;
  if (blocks < 2 * std::int64_t{participants})
    chunk = ceil_div(longest, ceil_div(2 * std::int64_t{participants}, blocks));
  const std::int64_t row_bytes = std::max(bound.k.seq * bound.k.element_bytes, bound.v.seq * bound.v.element_bytes);
  if (row_bytes >= kPageBytes) chunk = std::min(chunk, kTlbReachBytes / (2 * row_bytes));
  chunk = round_up(std::max<std::int64_t>(chunk, 1), config.block_kv);
  return chunk >= longest ? 0 : chunk;
}

void aim_at_chunk_scratch(AttentionBlockArgs& call, float* o_part, float* lse_part, std::int64_t dv) {
  // Row r at r·dv: (r % positions)·o_rs + (r / positions)·o_hs with o_rs = dv and o_hs = positions·dv.
  const std::int64_t positions = std::min(call.positions, call.rows);
  call.o = o_part, call.o_rs = dv, call.o_ds = 1, call.o_hs = positions * dv, call.o_f32 = 1;
  call.lse = lse_part, call.lse_rs = 1, call.lse_hs = positions;
}

void merge_key_chunks(const AttentionBlockArgs& call, std::int64_t chunks, const float* o_parts,
                      std::int64_t o_chunk_floats, const float* lse_parts, std::int64_t lse_chunk_floats,
                      std::int64_t dv, DType o_type) {
  std::vector<float> weight(static_cast<std::size_t>(chunks));
  std::vector<float> row(static_cast<std::size_t>(dv));
  // O's element `at` = x, rounded as the kernel rounds its own stores.
  const auto store = [&](std::int64_t at, float x) {
    if (o_type == DType::bf16)
      static_cast<std::uint16_t*>(call.o)[at] = to_bf16(x);
    else
      static_cast<float*>(call.o)[at] = x;
  };
  for (std::int64_t r = 0; r < call.rows; ++r) {
    float top = -std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < chunks; ++c) top = std::max(top, lse_parts[c * lse_chunk_floats + r]);
    const std::int64_t at = (r % call.positions) * call.o_rs + (r / call.positions) * call.o_hs;
    if (std::isinf(top)) {  // no chunk saw a key of this row: zeros, as the unsplit kernel writes
      for (std::int64_t d = 0; d < dv; ++d) store(at + d * call.o_ds, 0);
      if (call.lse) call.lse[(r % call.positions) * call.lse_rs + (r / call.positions) * call.lse_hs] = top;
      continue;
    }
    float total = 0;
    for (std::int64_t c = 0; c < chunks; ++c)
      total += weight[static_cast<std::size_t>(c)] = std::exp(lse_parts[c * lse_chunk_floats + r] - top);
    std::fill(row.begin(), row.end(), 0.0f);
    for (std::int64_t c = 0; c < chunks; ++c) {
      const float w = weight[static_cast<std::size_t>(c)] / total;
      const float* part = o_parts + c * o_chunk_floats + r * dv;
      if (w != 0)
        for (std::int64_t d = 0; d < dv; ++d) row[static_cast<std::size_t>(d)] += w * part[d];
    }
    for (std::int64_t d = 0; d < dv; ++d) store(at + d * call.o_ds, row[static_cast<std::size_t>(d)]);
    if (call.lse)
      call.lse[(r % call.positions) * call.lse_rs + (r / call.positions) * call.lse_hs] = top + std::log(total);
  }
}

}  // namespace tessera
