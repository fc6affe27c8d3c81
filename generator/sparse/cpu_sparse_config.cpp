#include "generator/sparse/cpu_sparse_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "generator/core/arith.hpp"
#include "generator/core/config_fields.hpp"
#include "generator/core/error.hpp"
#include "generator/sparse/sparse_json.hpp"

namespace tessera {

namespace {

// Registers left for B's vectors, the broadcast value and addresses beside the accumulators.
constexpr int kSpareRegisters = 4;
constexpr int kMaxPrefetch = 64;
constexpr int kMaxKPanel = 4096;

// SDDMM's K panel: where B is larger than the L2, the widest power-of-two slice of K (32 elements at least) whose B
// rows fit in it; 0 where B fits whole or no slice does. Xeon (2 MiB L2, 1 thread): 4096^2 at 1% with K = 256 ran
// 4.95 ms whole, and as K = 64 on a contiguous B 0.76 ms a pass; 8192^2 with K = 128, 10.4 ms whole, 3.1 ms a pass.
// Entries of the pattern per B row from which K panels may pay for their packing.
constexpr std::int64_t kPanelEntriesPerBRow = 16;
constexpr std::int64_t kPanelMinL2Bytes = std::int64_t{1} << 20;

int sddmm_k_panel_for(const SddmmProblem& p, const CpuTarget& target) {
  const auto b_bytes = [&](std::int64_t k) { return static_cast<double>(p.n) * static_cast<double>(k) * 4; };
  const auto l2 = static_cast<double>(target.l2_bytes);
  if (b_bytes(p.k) <= l2) return 0;
  // Nor on an L2 of less than 1 MiB: Zen 3's 512 KiB held only panels of 32-64 elements, and every pass packing and
  // re-reading its slice lost (1 thread, `tessera sddmm --gen G --k K --config k_panel=P`, alternated: 4096^2 at 1%,
  // K = 256, 4.5-5.8 ms whole, 15.9 in panels of 32; 8192^2 at 1%, K = 128, 10.4-11.5, 16.3-18.6 in panels of 64;
  // 2048^2 at 2%, K = 256, 2.8-3.1, 3.8-4.3).
  if (target.l2_bytes < kPanelMinL2Bytes) return 0;
  // Each pass packs all of B's slice: that pays only where a B row serves 16 entries or more (the AMX Xeon, 4096^2
  // uniform, K = 256, one thread: 8 entries a B row 1.07 ms whole, 1.19 in panels of 64; 16: 1.87 and 1.60; 2: 0.38
  // and 0.88; a pattern of 599 x 8044 with 0.6 a B row ran 4.9x slower in panels).
  if (p.pattern.nnz < kPanelEntriesPerBRow * p.n) return 0;
  // Nor where the entries cluster: neighbouring rows then name the same few B rows, already cached (banded, 9787^2
  // at 0.2%, K = 443: 3.8x slower in panels of 32).
  static_assert(PatternStats::kSquareBlockSides[0] == 4);
  if (p.pattern.square_block_fill[0] >= 0.25) return 0;
  int panel = std::max(32, target.vector_lanes());
  if (panel >= p.k || b_bytes(panel) > l2) return 0;
  while (2 * panel < p.k && 2 * panel <= kMaxKPanel && b_bytes(2 * panel) <= l2) panel *= 2;
  return panel;
}

int accumulator_budget(const CpuTarget& target) { return target.vector_registers() - kSpareRegisters; }

}  // namespace

int cpu_spmm_max_block_rows(const CpuTarget& target) { return accumulator_budget(target); }

int cpu_spmm_block_rows_for(int block_rows, const CpuTarget& target) {
  const int budget = accumulator_budget(target);
  return block_rows <= budget ? block_rows : static_cast<int>(std::bit_floor(static_cast<unsigned>(budget)));
}

CpuSpmmConfig CpuSpmmConfig::default_for(const SpmmProblem& p, const CpuTarget& target) {
  // Fitted on `tessera model holdout --op spmm` timings (Zen 4: 150 problems drawn outside the suites, 1 and 2
  // threads, each timed over its whole space): on 60 fresh problems these rules lose 3.8% (1 thread) and 3.0% (2) to
  // the best variant on average, the rules before them (N in as few tiles as the registers allow, two chains,
  // prefetch unless B fits in the L2) 20% and 19%:
  CpuSpmmConfig c;
  const int lanes = target.vector_lanes();
  const int rows = p.signature.a.block_rows;
  const int vectors = static_cast<int>(std::max<std::int64_t>(1, ceil_div(std::max<std::int64_t>(p.n, 1), lanes)));
  // - narrow tiles: a CSR tile of 2-4 vectors (N of at most 4 vectors in one tile), a BSR tile of 1-2 (one for
  //   blocks of 8 rows or more), the width that pads N least, the wider on a tie. Tiles of 5-8 vectors often ran 10-50%
  //   behind (N = 79: 5 vectors 38%; N = 360: 8 vectors 30%); each pass over a row's entries re-reads only its
  //   indices and values, which stay in L1.
  const auto least_padding = [&](std::initializer_list<int> widths) {
    int best = *widths.begin();
    for (int w : widths) {
      const std::int64_t pad = ceil_div(vectors, w) * w - vectors;
      const std::int64_t best_pad = ceil_div(vectors, best) * best - vectors;
      if (pad < best_pad || (pad == best_pad && w > best)) best = w;
    }
    return best;
  };
  //   AVX2 takes 2 vectors for blocks of fewer than 8 rows (Zen 3, `tessera model holdout --op spmm`, mean regret of
  //   the BSR problems, the rule before -> this one: seeds 12-14 (1 and 2 threads, 28 problems) 8.1% -> 6.3%, seeds
  //   15-16 (22) 15.6% -> 4.4%, seed 17 (10) 28% -> 10%).
  //   Cores with two 512-bit FMA units (the AMX Xeon: 90 held-out problems on 1 and 2 threads, judged on fresh ones)
  //   want BSR tiles a vector wider: N whole up to 3 vectors for blocks of fewer than 8 rows, else 2-3 (4×4 blocks
  //   2.9% behind the best on average against 6.2% for the Zen 4 rule; 8×8 blocks 6.3% against 22.8%).
  const bool two_units = target.isa == CpuIsa::Avx512 && target.vector_fmas_per_cycle >= 2;
  // - a CSR row of B up to 256 bytes of f32 accumulators (4 AVX-512 vectors, 8 AVX2 ones) in one tile: each entry's
  //   B row is then read once (Zen 3, AVX2, whole ÷ the 4-vector tiles before, `tessera tune spmm --exhaustive` and
  //   alternated CLI runs, with this rule's prefetch: N = 64 1.05-1.11× on 4096^2 at 5%, 1024^2 at 30% and the
  //   10^5-row power law on one thread (4096^2 at 0.5%: 1.18× without prefetch), 1.15-1.19× on two; N = 40, 48, 56
  //   2.0×, 1.4×, 2.2×; 8192^2 at 1%, N = 64, 1.04×, 1% behind the best).
  const int whole_row_vectors = 256 / (lanes * 4);
  if (rows == 1)
    c.nv = vectors <= whole_row_vectors ? vectors : least_padding({2, 3, 4});
  else if (two_units)
    c.nv = rows < 8 && vectors <= 3 ? vectors : std::min(vectors, least_padding({2, 3}));
  else if (rows < 8)
    c.nv = target.isa == CpuIsa::Avx2 ? std::min(vectors, 2) : vectors <= 2 ? 1 : least_padding({1, 2});
  else
    c.nv = 1;
  c.nv = std::max(1, std::min(c.nv, accumulator_budget(target) / rows));
  // - one chain: a tile's vectors are independent FMA chains already (two chains lost 4-17 points more than one on
  //   tiles of 2-4 vectors); a one-vector CSR tile whose B sits in the L2 keeps four (4.5% behind the best on average
  //   there, one chain 6%, two 10%), two on cores with two 512-bit FMA units (the AMX Xeon: 2.5%; four 9.9%).
  const std::int64_t element = dtype_bytes(p.signature.dense.b.dtype), row_bytes = p.n * element;
  const bool b_in_l2 = p.k * row_bytes <= target.l2_bytes / 2;
  c.chains = rows == 1 && c.nv == 1 && b_in_l2 ? (two_units ? 2 : 4) : 1;
  // - software prefetch of the B rows named `prefetch` entries ahead: 16 for rows of at most 256 bytes scattered
  //   over a B beyond the L2 (CSR), 8 for longer rows of a B within the L2 (CSR) or beyond it (BSR), none otherwise
  //   (clustered entries, short rows within the L2, long CSR rows beyond it): each the best of its category's
  //   timings; 8 ahead for long CSR rows beyond the L2, the rule before, lost 17% there on average, none 6%.
  static_assert(PatternStats::kSquareBlockSides[0] == 4);
  const bool clustered = p.pattern.square_block_fill[0] >= 0.25;
  if (rows > 1)
    c.prefetch = !b_in_l2 && row_bytes > 256 ? 8 : 0;
  else if (clustered)
    c.prefetch = 0;
  else if (b_in_l2)
    c.prefetch = row_bytes > 256 ? 8 : 0;
  else
    c.prefetch = row_bytes <= 256 ? 16 : 0;
  return c;
}

namespace {
const ConfigFields<CpuSpmmConfig>& spmm_fields() {
  static const ConfigFields<CpuSpmmConfig> fields{
      {"nv", &CpuSpmmConfig::nv}, {"chains", &CpuSpmmConfig::chains}, {"prefetch", &CpuSpmmConfig::prefetch}};
  return fields;
}
const ConfigFields<CpuSddmmConfig>& sddmm_fields() {
  static const ConfigFields<CpuSddmmConfig> fields{{"cols", &CpuSddmmConfig::cols},
                                                   {"unroll", &CpuSddmmConfig::unroll},
                                                   {"prefetch", &CpuSddmmConfig::prefetch},
                                                   {"k_panel", &CpuSddmmConfig::k_panel}};
  return fields;
}
}  // namespace

CpuSpmmConfig CpuSpmmConfig::with_overrides(const std::string& text) const {
  return with_config_overrides(*this, text, spmm_fields());
}

nlohmann::json to_json(const CpuSpmmConfig& config) { return config_fields_to_json(config, spmm_fields()); }

template <>
CpuSpmmConfig from_json<CpuSpmmConfig>(const nlohmann::json& j) {
  return config_fields_from_json(j, spmm_fields());
}

CpuSddmmConfig CpuSddmmConfig::default_for(const SddmmProblem& p, const CpuTarget& target) {
  CpuSddmmConfig c;
  // Four B rows side by side, K unrolled once (with the prefetch below): within 4% of the variant space's best on 12
  // of the suite's 14 cases (8192^2 K = 128: 10-13%, its best unrolls K twice), timed interleaved in one process
  // (`tessera tune sddmm --exhaustive --samples 9`, Zen 4, 1 and 2 threads); eight rows, the default before, ran 12-36%
  // behind the best on every one.
  c.cols = std::min(4, target.vector_lanes());
  c.unroll = 1;
  // Software prefetch of the B rows `prefetch` entries ahead pays where they are scattered and short. Not where a
  // row is 1 KiB or longer (the hardware prefetcher follows it, and prefetching its first lines only costs issue
  // slots: 4096^2 at 1%, K = 256, 3-11% faster without), nor where the entries cluster so that neighbouring rows name
  // the same B rows, already cached (banded, 75% of 4x4 blocks filled: 16-19% faster without; blocks of 16: 2-6%).
  // Both judged by a pass's slice of K where K is taken in panels.
  c.k_panel = sddmm_k_panel_for(p, target);
  const std::int64_t k = c.k_panel > 0 ? c.k_panel : p.k;
  const bool long_rows = k * 4 >= 1024;
  static_assert(PatternStats::kSquareBlockSides[0] == 4);
  const bool clustered = p.pattern.square_block_fill[0] >= 0.25;
  // Nor where B fits in half of the L2 (4096 x 32: 11% faster without).
  const bool b_in_l2 = p.n * k * 4 <= target.l2_bytes / 2;
  c.prefetch = long_rows || clustered || b_in_l2 ? 0 : 16;
  // Intel's cores measured otherwise: there the prefetch pays over rows of 1 KiB or more, and over a B within half the
  // L2 where its rows are longer than two lines (the AMX Xeon's held-out timings, seeds 1-4, 211 problems: the
  // fastest prefetched in 11 of 14 of the former, 7-23% ahead, and in 27 of 40 uniform ones of the latter; 4096^2 at
  // 1%, K = 64: 0.71 -> 0.62 ms on one thread; rows of 128 bytes, 4096 x 32, 0.28 without and 0.34 with).
  if (target.intel) c.prefetch = clustered || (b_in_l2 && k * 4 <= 128) ? 0 : 16;
  return c;
}

CpuSddmmConfig CpuSddmmConfig::with_overrides(const std::string& text) const {
  return with_config_overrides(*this, text, sddmm_fields());
}

nlohmann::json to_json(const CpuSddmmConfig& config) { return config_fields_to_json(config, sddmm_fields()); }

template <>
CpuSddmmConfig from_json<CpuSddmmConfig>(const nlohmann::json& j) {
  return config_fields_from_json(j, sddmm_fields());
}

void validate(const SpmmSignature& s, const CpuSpmmConfig& c, const CpuTarget& target) {
  s.check();
  if (s.a.value == DType::f16) throw ConfigError("spmm: f16 values run on CUDA targets; the CPU takes f32 or bf16");
  if (s.dense.b.dtype == DType::f16)
    throw ConfigError("spmm: an f16 B runs on CUDA targets; the CPU takes f32 or bf16");
  if (s.dense.b.layout.kind() != LayoutKind::RowMajor) throw ConfigError("spmm: the CPU kernel reads a row-major B");
  if (c.nv < 1 || c.nv > 8) throw ConfigError(fmt::format("spmm: nv must be in 1..8, got {}", c.nv));
  if (c.chains < 1 || c.chains > 4) throw ConfigError(fmt::format("spmm: chains must be in 1..4, got {}", c.chains));
  if (c.prefetch < 0 || c.prefetch > kMaxPrefetch)
    throw ConfigError(fmt::format("spmm: prefetch must be in 0..{}, got {}", kMaxPrefetch, c.prefetch));
  const int accumulators = c.chains * s.a.block_rows * c.nv;
  if (accumulators > accumulator_budget(target))
    throw ConfigError(fmt::format(
        "spmm: chains x block rows x nv = {} accumulators, more than the {} vector registers {} leaves for them{}",
        accumulators, accumulator_budget(target), target.str(),
        s.a.block_rows > accumulator_budget(target) ? " (store A in blocks of fewer rows)" : ""));
}

void validate(const SddmmSignature& s, const CpuSddmmConfig& c, const CpuTarget& target) {
  s.check();
  if (s.pattern.value == DType::f16)
    throw ConfigError("sddmm: f16 pattern values run on CUDA targets; the CPU takes f32 or bf16");
  // The runtime widens other types and layouts into f32 rows first.
  if (s.dense.a.dtype != DType::f32 || s.dense.b.dtype != DType::f32)
    throw ConfigError("sddmm: the CPU kernel reads f32 rows of A and B");
  const int widest = std::min(8, target.vector_lanes());
  if (c.cols < 1 || c.cols > widest)
    throw ConfigError(fmt::format("sddmm: cols must be in 1..{}, got {}", widest, c.cols));
  if (c.unroll < 1 || c.unroll > 4) throw ConfigError(fmt::format("sddmm: unroll must be in 1..4, got {}", c.unroll));
  if (c.prefetch < 0 || c.prefetch > kMaxPrefetch)
    throw ConfigError(fmt::format("sddmm: prefetch must be in 0..{}, got {}", kMaxPrefetch, c.prefetch));
  const int lanes = target.vector_lanes();
  if (c.k_panel < 0 || c.k_panel > kMaxKPanel || c.k_panel % lanes != 0)
    throw ConfigError(
        fmt::format("sddmm: k_panel must be 0 or a multiple of {} up to {}, got {}", lanes, kMaxKPanel, c.k_panel));
  if (c.cols * c.unroll > accumulator_budget(target))
    throw ConfigError(fmt::format("sddmm: cols x unroll = {} accumulators, more than {} registers", c.cols * c.unroll,
                                  accumulator_budget(target)));
}

std::vector<CpuSpmmConfig> cpu_spmm_variants(const SpmmProblem& p, const CpuTarget& target) {
  std::vector<CpuSpmmConfig> out{CpuSpmmConfig::default_for(p, target)};
  const int lanes = target.vector_lanes();
  const int most = static_cast<int>(std::min<std::int64_t>(8, ceil_div(std::max<std::int64_t>(p.n, 1), lanes)));
  // The usual widths, and N whole in one tile (5 or 7 vectors: default_for's tile for such rows).
  for (int nv : {1, 2, 3, 4, 6, 8, most}) {
    if (nv > most) continue;
    for (int chains : {1, 2, 4})
      for (int prefetch : {0, 8, 16}) {
        const CpuSpmmConfig c{nv, chains, prefetch};
        if (std::find(out.begin(), out.end(), c) != out.end()) continue;
        try {
          validate(p.signature, c, target);
        } catch (const ConfigError&) {
          continue;
        }
        out.push_back(c);
      }
  }
  return out;
}

std::vector<CpuSddmmConfig> cpu_sddmm_variants(const SddmmProblem& p, const CpuTarget& target) {
  std::vector<CpuSddmmConfig> out{CpuSddmmConfig::default_for(p, target)};
  const auto add = [&](const CpuSddmmConfig& c) {
    if (std::find(out.begin(), out.end(), c) != out.end()) return;
    try {
      validate(p.signature, c, target);
    } catch (const ConfigError&) {
      return;
    }
    out.push_back(c);
  };
  for (int cols : {2, 4, 8})
    for (int unroll : {1, 2, 4})
      for (int prefetch : {0, 16, 32}) add({cols, unroll, prefetch, 0});
  // Where B is beyond the L2: passes over its K panel and over half of it, in the dot tiles that matter there.
  if (const int panel = sddmm_k_panel_for(p, target); panel > 0)
    for (int k_panel : {panel, panel / 2})
      for (int cols : {4, 8})
        for (int unroll : {1, 2})
          for (int prefetch : {0, 16}) add({cols, unroll, prefetch, k_panel});
  return out;
}

}  // namespace tessera
