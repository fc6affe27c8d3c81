#include "generator/cost/sparse_cost.hpp"

#include <algorithm>
#include <cmath>

#include "generator/core/arith.hpp"

namespace tessera {

namespace {

constexpr double kFmaLatency = 4;     // cycles before an accumulator can take its next FMA
constexpr double kEntryOverhead = 2;  // index load, scale, value broadcast
constexpr double kRowOverhead = 12;   // offsets, loop set-up, masks
constexpr double kL3BytesPerCycle = 24;
constexpr double kDramBytesPerCycle = 8;
constexpr double kMissLatency = 60;         // cycles a gathered row waits without a prefetch (L3)
constexpr double kCopyCyclesPerByte = 0.1;  // packing a panel of B: a read and a write from the L3

// Vector loads a core issues per cycle: two of 256 bits, one of 512 on the cores measured here.
double loads_per_cycle(const CpuTarget& t) { return t.vector_lanes() == 16 ? 1.0 : 2.0; }

// Cycles per byte of B gathered from wherever B lives.
double gather_cycles_per_byte(double b_bytes, const CpuTarget& t) {
  if (b_bytes <= static_cast<double>(t.l2_bytes) / 2) return 0;
  return 1.0 / (b_bytes <= static_cast<double>(t.l3_bytes) ? kL3BytesPerCycle : kDramBytesPerCycle);
}

// Time per stored value and 64 columns of N (ns, Zen 4, one thread) of the CSR tile and of BSR blocks of 4, 8 and
// 16, at N = 64 and N = 256 (the median over banded, block-pruned and uniform patterns, `tessera spmm --format`):
// a block's micro-kernel does several times the CSR tile's work per loaded value, and at wide N the larger blocks
// load fewer B rows per FMA.
constexpr double kCsrValueNs[2] = {3.5, 3.3};
constexpr double kBlockValueNs[3][2] = {{1.2, 2.0}, {1.25, 1.45}, {1.25, 1.25}};
// Blocks must be estimated this much faster: the copy costs memory, and the estimate is rough.
constexpr double kBlockMargin = 1.15;

}  // namespace

int square_block_for(const PatternStats& stats, std::int64_t n, int max_side) {
  // Between N = 64 and 256, interpolated in log2(N).
  const double t = std::clamp(std::log2(static_cast<double>(std::max<std::int64_t>(n, 1)) / 64) / 2, 0.0, 1.0);
  const auto at = [&](const double(&ns)[2]) { return ns[0] + t * (ns[1] - ns[0]); };
  int best = 1;
  double best_ns = at(kCsrValueNs) / kBlockMargin;
  for (std::size_t i = 0; i < PatternStats::kSquareBlockSides.size(); ++i) {
    const double fill = stats.square_block_fill[i];
    if (fill <= 0 || PatternStats::kSquareBlockSides[i] > max_side) continue;
    const double ns = at(kBlockValueNs[i]) / fill;
    if (ns < best_ns) best = PatternStats::kSquareBlockSides[i], best_ns = ns;
  }
  return best;
}

double spmm_cycles(const SpmmProblem& p, const CpuSpmmConfig& c, const CpuTarget& t) {
  const SparseSignature& a = p.signature.a;
  const int lanes = t.vector_lanes();
  const double width = static_cast<double>(c.nv) * lanes;
  const double tiles = static_cast<double>(ceil_div(std::max<std::int64_t>(p.n, 1), c.nv * lanes));
  const double entries = static_cast<double>(p.pattern.nnz);
  // One entry of one tile: the block's columns each load nv vectors and feed rows x nv FMAs.
  const double fma = a.block_rows * a.block_cols * c.nv / static_cast<double>(t.vector_fmas_per_cycle);
  const double loads = a.block_cols * c.nv / loads_per_cycle(t) + kEntryOverhead;
  const double latency = kFmaLatency * a.block_cols / c.chains;
  double per_entry = std::max({fma, loads, latency});
  const double elem = dtype_bytes(p.signature.dense.b.dtype);
  const double b_bytes = static_cast<double>(p.k) * static_cast<double>(p.n) * elem;
  const double slice = width * elem * a.block_cols;
  per_entry += slice * gather_cycles_per_byte(b_bytes, t);
  if (c.prefetch == 0 && b_bytes > static_cast<double>(t.l2_bytes) / 2) per_entry += kMissLatency / (1 + c.chains);
  // A tile past N computes its padding at full cost; every tile pays its set-up and the epilogue's stores.
  const double rows = static_cast<double>(p.pattern.rows);
  return entries * tiles * per_entry + rows * tiles * (kRowOverhead + a.block_rows * c.nv * (1 + c.chains));
}

double sddmm_cycles(const SddmmProblem& p, const CpuSddmmConfig& c, const CpuTarget& t) {
  const int lanes = t.vector_lanes();
  // K in panels: passes over the pattern, each a dot of the panel's length against a B of the panel's width, after
  // packing that slice of B (a copy of B in all).
  const std::int64_t k = c.k_panel > 0 ? std::min<std::int64_t>(c.k_panel, p.k) : p.k;
  const double passes = static_cast<double>(ceil_div(std::max<std::int64_t>(p.k, 1), std::max<std::int64_t>(k, 1)));
  const double k_vectors = std::max<double>(1, static_cast<double>(ceil_div(std::max<std::int64_t>(k, 1), lanes)));
  const double groups = static_cast<double>(p.pattern.nnz) / c.cols + static_cast<double>(p.pattern.rows);
  const double fma = c.cols / static_cast<double>(t.vector_fmas_per_cycle);
  const double loads = (c.cols + 1) / loads_per_cycle(t);
  const double latency = kFmaLatency / c.unroll;
  double per_step = std::max({fma, loads, latency});
  const double b_bytes = static_cast<double>(p.n) * static_cast<double>(k) * 4;
  per_step += c.cols * lanes * 4 * gather_cycles_per_byte(b_bytes, t);
  if (c.prefetch == 0 && b_bytes > static_cast<double>(t.l2_bytes) / 2) per_step += kMissLatency / k_vectors;
  // The lane sums: a shuffle-add tree of about 2·cols steps, and the group's epilogue and stores.
  const double reduce = 2.0 * c.cols + 6;
  const double packing = passes > 1 ? static_cast<double>(p.n) * static_cast<double>(p.k) * 4 * kCopyCyclesPerByte : 0;
  return passes * (groups * (k_vectors * per_step + reduce) + static_cast<double>(p.pattern.rows) * kRowOverhead) +
         packing;
}

std::vector<double> spmm_scores(const SpmmProblem& p, const std::vector<CpuSpmmConfig>& configs, const CpuTarget& t) {
  const CpuSpmmConfig first = CpuSpmmConfig::default_for(p, t);
  std::vector<double> scores;
  for (const CpuSpmmConfig& c : configs) scores.push_back(c == first ? -1.0 : spmm_cycles(p, c, t));
  return scores;
}

std::vector<double> sddmm_scores(const SddmmProblem& p, const std::vector<CpuSddmmConfig>& configs,
                                 const CpuTarget& t) {
  const CpuSddmmConfig first = CpuSddmmConfig::default_for(p, t);
  std::vector<double> scores;
  for (const CpuSddmmConfig& c : configs) scores.push_back(c == first ? -1.0 : sddmm_cycles(p, c, t));
  return scores;
}

}  // namespace tessera
