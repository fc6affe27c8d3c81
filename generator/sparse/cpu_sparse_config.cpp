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

int accumulator_budget(const CpuTarget& target) { return target.vector_registers() - kSpareRegisters; }

}  // namespace

int cpu_spmm_max_block_rows(const CpuTarget& target) { return accumulator_budget(target); }

int cpu_spmm_block_rows_for(int block_rows, const CpuTarget& target) {
  const int budget = accumulator_budget(target);
  return block_rows <= budget ? block_rows : static_cast<int>(std::bit_floor(static_cast<unsigned>(budget)));
}

CpuSpmmConfig CpuSpmmConfig::default_for(const SpmmProblem& p, const CpuTarget& target) {
  CpuSpmmConfig c;
  const int lanes = target.vector_lanes();
  const int rows = p.signature.a.block_rows;
  // N in as few tiles as the registers allow: a tile re-reads the row's indices and values, B is read once anyway.
  const int budget = accumulator_budget(target);
  const int widest = std::max(1, std::min(8, budget / rows));
  c.nv = static_cast<int>(std::clamp<std::int64_t>(ceil_div(std::max<std::int64_t>(p.n, 1), lanes), 1, widest));
  // Tiles of equal width: N = 80 on 16 lanes is two tiles of 3 and 2 vectors rather than 4 and 1.
  const std::int64_t tiles = ceil_div(std::max<std::int64_t>(p.n, 1), std::int64_t{c.nv} * lanes);
  c.nv = static_cast<int>(ceil_div(ceil_div(std::max<std::int64_t>(p.n, 1), tiles), lanes));
  // One block row of a BSR block already gives `rows` independent chains.
  c.chains = rows >= 4 ? 1 : std::max(1, std::min(2, budget / (rows * c.nv)));
  // Software prefetch of the B rows named `prefetch` entries ahead, from each suite case's variant space timed
  // interleaved in one process (`tessera tune spmm --exhaustive --samples 7`, Zen 4, 1 and 2 threads):
  // - none for blocks: a block row's entries name neighbouring B rows, which the hardware prefetcher follows (banded
  //   in 4x4 blocks, N = 64: 8 ahead ran 12-19% behind none; 16x16 blocks 0-3%);
  // - none where B fits in half of the L2 (4096 x 32 f32: 16 ahead 9% behind none; but 1024^2 at 30%, N = 64, and
  //   bf16 4096 x 64 ran 3% behind 8 and 16 ahead);
  // - none where B's rows are 2 KiB or more apart: every entry's slice of B falls in the same L1 sets, and lines
  //   fetched ahead evict what the next entries load (1024^2 at 10%, N = 1024: 2 ahead 1-6% behind none; 8 ahead was
  //   9.1 ms against 7.2 for 2);
  // - 16 ahead for rows of at most 256 bytes scattered over the matrix (N = 64 f32, uniform and power-law: 8 ahead 1-4%
  //   behind, the power-law rows 5-11%); 8 where the entries cluster (1024^2 at 30%) or the rows are longer (N = 96 to
  //   256 f32: 16 ahead 0-22% behind 8, none up to 19%).
  const std::int64_t element = dtype_bytes(p.signature.dense.b.dtype), row_bytes = p.n * element;
  const bool b_in_l2 = p.k * row_bytes <= target.l2_bytes / 2;
  static_assert(PatternStats::kSquareBlockSides[0] == 4);
  const bool clustered = p.pattern.square_block_fill[0] >= 0.25;
  c.prefetch = rows >= 4 || b_in_l2 || row_bytes >= 2048 ? 0 : row_bytes <= 256 && !clustered ? 16 : 8;
  return c;
}

namespace {
const ConfigFields<CpuSpmmConfig>& spmm_fields() {
  static const ConfigFields<CpuSpmmConfig> fields{
      {"nv", &CpuSpmmConfig::nv}, {"chains", &CpuSpmmConfig::chains}, {"prefetch", &CpuSpmmConfig::prefetch}};
  return fields;
}
const ConfigFields<CpuSddmmConfig>& sddmm_fields() {
  static const ConfigFields<CpuSddmmConfig> fields{
      {"cols", &CpuSddmmConfig::cols}, {"unroll", &CpuSddmmConfig::unroll}, {"prefetch", &CpuSddmmConfig::prefetch}};
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
  const bool long_rows = p.k * 4 >= 1024;
  static_assert(PatternStats::kSquareBlockSides[0] == 4);
  const bool clustered = p.pattern.square_block_fill[0] >= 0.25;
  // Nor where B fits in half of the L2 (4096 x 32: 11% faster without).
  const bool b_in_l2 = p.n * p.k * 4 <= target.l2_bytes / 2;
  c.prefetch = long_rows || clustered || b_in_l2 ? 0 : 16;
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
  if (c.cols * c.unroll > accumulator_budget(target))
    throw ConfigError(fmt::format("sddmm: cols x unroll = {} accumulators, more than {} registers", c.cols * c.unroll,
                                  accumulator_budget(target)));
}

std::vector<CpuSpmmConfig> cpu_spmm_variants(const SpmmProblem& p, const CpuTarget& target) {
  std::vector<CpuSpmmConfig> out{CpuSpmmConfig::default_for(p, target)};
  const int lanes = target.vector_lanes();
  const int most = static_cast<int>(std::min<std::int64_t>(8, ceil_div(std::max<std::int64_t>(p.n, 1), lanes)));
  for (int nv : {1, 2, 3, 4, 6, 8}) {
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
  for (int cols : {2, 4, 8})
    for (int unroll : {1, 2, 4})
      for (int prefetch : {0, 16, 32}) {
        const CpuSddmmConfig c{cols, unroll, prefetch};
        if (std::find(out.begin(), out.end(), c) != out.end()) continue;
        try {
          validate(p.signature, c, target);
        } catch (const ConfigError&) {
          continue;
        }
        out.push_back(c);
      }
  return out;
}

}  // namespace tessera
