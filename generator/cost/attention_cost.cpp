#include "generator/cost/attention_cost.hpp"

#include <algorithm>
#include <cmath>

#include "generator/core/arith.hpp"

namespace tessera {

namespace {
// Vector operations of the softmax per vector of scores (scale, max, exp2, sum, store), and per row and key block
// (reductions, rescale factors).
constexpr double kSoftmaxOpsPerVector = 18;
constexpr double kSoftmaxOpsPerRowBlock = 40;
// Operations per packed vector (load, in-register transpose share, store).
constexpr double kPackOpsPerVector = 4;
// Bytes per cycle a core streams from memory (about 25 GB/s at 3.5 GHz).
constexpr double kMemoryBytesPerCycle = 7;
// bf16 multiply-adds per cycle of AMX tile products fed from L1 and L2 (half of tdpbf16ps' 1024), and the cycles
// of a product's start and end (its accumulators loaded or zeroed, then stored after the last tdpbf16ps).
constexpr double kAmxMacsPerCycle = 512;
constexpr double kAmxCyclesPerProduct = 60;
}  // namespace

double attention_cycles(const AttentionProblem& p, const CpuAttentionConfig& c, const CpuTarget& target) {
  const AttentionSignature& s = p.signature;
  const double lanes = target.vector_lanes(), fma_rate = target.vector_fmas_per_cycle;
  const double nr = c.nr(target);
  const double dv_padded = static_cast<double>(round_up(s.head_dim_v, static_cast<std::int64_t>(nr)));
  const int group = p.kv_heads > 0 ? static_cast<int>(p.heads / p.kv_heads) : 1;
  double cycles = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t sq = p.q_len(b), skv = p.kv_len(b);
    if (sq == 0) continue;
    // Stacked grouped-query decoding: a group's heads are the rows of one block, sq rows each.
    const bool stacked = stacks_query_heads(p, c.block_q);
    const std::int64_t rows_per_head = stacked ? group * sq : sq;
    const std::int64_t heads = stacked ? p.kv_heads : p.heads;
    const std::int64_t blocks = ceil_div(rows_per_head, c.block_q);
    for (std::int64_t qb = 0; qb < blocks; ++qb) {
      const std::int64_t rows = std::min<std::int64_t>(c.block_q, rows_per_head - qb * c.block_q);
      const double padded_rows = static_cast<double>(round_up(rows, c.mr));
      // Keys this block reads: all, or up to its last row's causal bound.
      const std::int64_t last = stacked ? sq - 1 : qb * c.block_q + rows - 1;
      const std::int64_t keys = visible_keys(s.causal, last, sq, skv);
      const double key_blocks = static_cast<double>(ceil_div(keys, c.block_kv));
      const double keys_padded = static_cast<double>(round_up(keys, static_cast<std::int64_t>(nr)));
      double fmas = 0, other = 0;
      if (c.amx != CpuAttentionConfig::kAmxNone) {
        // Tile products: S over the head dimension padded to 32, O over the keys in rows of 32; then the softmax.
        const double keys32 = static_cast<double>(round_up(keys, 32));
        const double macs = padded_rows * keys32 * (static_cast<double>(c.packed_head_dim_qk(s)) + dv_padded);
        const double groups = padded_rows / c.mr;
        const double products = groups * (std::ceil(static_cast<double>(keys) / nr) + key_blocks * dv_padded / nr);
        other += padded_rows * keys_padded / lanes * kSoftmaxOpsPerVector;
        other += padded_rows * key_blocks * (kSoftmaxOpsPerRowBlock + 2 * dv_padded / lanes);
        const double pack =
            static_cast<double>(keys) * static_cast<double>(s.head_dim_qk + s.head_dim_v) / lanes * kPackOpsPerVector;
        other += blocks > 1 || group > 1 ? pack / static_cast<double>(blocks * (stacked ? 1 : group)) : pack;
        cycles += static_cast<double>(heads) * (macs / kAmxMacsPerCycle + products * kAmxCyclesPerProduct + other / 2);
        continue;
      }
      if (c.in_place) {
        // Dot tiles along d (plus a cross-lane sum per row and key), then P·V from V's rows.
        fmas += padded_rows * static_cast<double>(keys) * std::ceil(static_cast<double>(s.head_dim_qk) / lanes);
        other += padded_rows * static_cast<double>(keys) * 2;
      } else {
        fmas += padded_rows * keys_padded * static_cast<double>(s.head_dim_qk) / lanes;
        // Each tile step loads nv vectors and broadcasts mr values for mr·nv FMAs.
        other += padded_rows * keys_padded * static_cast<double>(s.head_dim_qk) / lanes * (c.mr + c.nv) /
                 (2.0 * c.mr * c.nv);
      }
      fmas += padded_rows * static_cast<double>(keys) * dv_padded / lanes;
      other += padded_rows * static_cast<double>(keys) * dv_padded / lanes * (c.mr + c.nv) / (2.0 * c.mr * c.nv);
      other += padded_rows * keys_padded / lanes * kSoftmaxOpsPerVector;
      other += padded_rows * key_blocks * (kSoftmaxOpsPerRowBlock + 2 * dv_padded / lanes);
      // Packing: per block when it is the head's only reader, else once per head (shared by its blocks).
      if (!c.in_place) {
        const double pack =
            static_cast<double>(keys) * static_cast<double>(s.head_dim_qk + s.head_dim_v) / lanes * kPackOpsPerVector;
        other += blocks > 1 || group > 1 ? pack / static_cast<double>(blocks * (stacked ? 1 : group)) : pack;
      }
      // Bytes of K and V from memory: read in place once; packed, read, written and read again (once per head when
      // its blocks share the packing).
      const double kv_bytes = static_cast<double>(dtype_bytes(s.dtype)) * static_cast<double>(keys) *
                              static_cast<double>(s.head_dim_qk + s.head_dim_v);
      const double memory = (c.in_place ? kv_bytes : 3 * kv_bytes / static_cast<double>(blocks)) / kMemoryBytesPerCycle;
      // bf16 pairs on vdpbf16ps: two products per lane per instruction.
      if (c.grouped(s, target)) fmas /= 2;
      cycles += static_cast<double>(heads) * std::max(fmas / fma_rate + other / 2, memory);
    }
  }
  return cycles;
}

std::vector<double> attention_scores(const AttentionProblem& problem, const std::vector<CpuAttentionConfig>& configs,
                                     const CpuTarget& target) {
  const CpuAttentionConfig first = CpuAttentionConfig::default_for(problem, target);
  std::vector<double> scores;
  for (const CpuAttentionConfig& c : configs)
    scores.push_back(c == first ? -1.0 : attention_cycles(problem, c, target));
  return scores;
}

}  // namespace tessera
