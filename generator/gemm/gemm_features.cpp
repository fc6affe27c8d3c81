#include "generator/gemm/gemm_features.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "generator/core/arith.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "generator/gemm/grid_plan.hpp"

namespace tessera {

namespace {
double log2p(double x) { return std::log2(std::max(x, 0.0) + 1.0); }
}  // namespace

// Streaming beyond the register tile overlaps computation, but not perfectly: the smaller still shows by half.
// Packing B is a phase of its own (B read and written, nothing computing meanwhile), and so adds.
double CpuAnalyticParts::total() const {
  const double work = compute + tiles;
  return std::max(work, memory) + 0.5 * std::min(work, memory) + packing + call;
}

namespace {
// Sustained bytes per core cycle from each level to one core (Zen 4 and 5 class; loads of a running GEMM, not the
// ports' peak): what the register tile is fed at when its operands come from there.
constexpr double kL2BytesPerCycle = 24.0, kL3BytesPerCycle = 12.0, kDramBytesPerCycle = 6.0;
// L2 lines fetched one at a time, each K step waiting on its own: what B read in place gets when its rows fight over
// L1's sets.
constexpr double kConflictedL2BytesPerCycle = 16.0;
// The hardware prefetchers follow about this many concurrent streams; B read in place walks KC rows at once. From
// memory, on both hosts measured, KC 64 already falls behind and KC 16 does not (with 64 here the analytic model's
// top-1 regret was 17.7% on the Zen 4 records and 46.7% on the Zen 3 ones, with 32 12.5% and 42.1%).
constexpr double kPrefetchStreams = 32.0;
// From L3 a Zen 4 keeps up with any KC (a limit there took its LLM family from 6.8% to 11.2%); the Zen 3 measured
// for AVX2 falls behind beyond 16 rows (42.1% -> 36.5% with the limit). Keyed by ISA, as that is all a record's
// target says of the microarchitecture.
double l3_prefetch_streams(const CpuTarget& t) { return t.isa == CpuIsa::Avx2 ? 16.0 : INFINITY; }

// How much of a cache a panel of `rows` rows of `row_bytes`, `ld_bytes` apart, can hold: rows that start on the same
// sets compete for those sets' ways. A power-of-two leading dimension puts every row on a few sets (B of 1024
// columns read in place: 16 distinct starting sets of the 1024 in a 512 KiB L2), and such a panel is evicted long
// before it fills the cache (the Zen 3 records: B in place over several rows of micro-tiles 2-4x slower than packed,
// where the analytic model thought the panel stayed in L2; its top-1 regret 63.9% -> 46.7% with this, Zen 4 18.2% ->
// 17.7%). The ways: 8, as in the L2 of Zen 3 and Zen 4.
double strided_panel_capacity(double ld_bytes, double row_bytes, double rows, double cache_bytes) {
  constexpr double kWays = 8.0, kLineBytes = 64.0;
  const double sets = std::max(1.0, std::floor(cache_bytes / (kLineBytes * kWays)));
  const auto period = static_cast<std::int64_t>(sets * kLineBytes);
  const auto ld = std::max<std::int64_t>(1, static_cast<std::int64_t>(ld_bytes));
  const double distinct_starts = std::min(rows, static_cast<double>(period / std::gcd(ld, period)));
  const double row_lines = std::ceil(row_bytes / kLineBytes);
  const double span_lines = std::ceil((std::max(rows - 1.0, 0.0) * ld_bytes + row_bytes) / kLineBytes);
  return std::min({sets, distinct_starts * row_lines, span_lines}) * kWays * kLineBytes;
}
}  // namespace

CpuAnalyticParts cpu_analytic_parts(const GemmProblem& p, const CpuGemmConfig& c, const CpuTarget& t) {
  // A transposed kernel is the untransposed kernel of the transposed product, and costs what that does.
  if (c.transpose) return cpu_analytic_parts(transposed(p), c.untransposed(), t);
  const double m = static_cast<double>(p.m), n = static_cast<double>(p.n),
               k = static_cast<double>(std::max<std::int64_t>(p.k, 1));
  const double batch = static_cast<double>(p.batch);
  const double lanes = t.vector_lanes(), mr = c.mr, v = c.nr / lanes, nr = c.nr;
  const double group = k_group(p.signature);  // K steps per multiply: 2 for vdpbf16ps, 4 for vpdpbusd
  const double elem = dtype_bytes(p.signature.a.dtype);
  const double tiles_m = tiles_of(m, mr), tiles_n = tiles_of(n, nr);
  const double kc = std::min<double>(c.kc, k), nc = std::min<double>(c.nc, tiles_n * nr);
  const double b_bytes = k * n * elem, a_bytes = m * k * elem, d_bytes = m * n * 4.0;
  // Repeated calls find an operand where its footprint fits.
  const auto level_bandwidth = [&](double bytes) {
    return bytes <= static_cast<double>(t.l2_bytes)   ? kL2BytesPerCycle
           : bytes <= static_cast<double>(t.l3_bytes) ? kL3BytesPerCycle
                                                      : kDramBytesPerCycle;
  };
  // A cold operand comes from memory on its first pass, whatever its size; later passes find it where it fits.
  const double a_level = p.a_cold ? kDramBytesPerCycle : level_bandwidth(a_bytes);
  const double b_level = p.b_cold ? kDramBytesPerCycle : level_bandwidth(b_bytes);
  const auto b_passes = [&](double bytes, double passes) {
    return bytes / b_level + (passes - 1.0) * bytes / level_bandwidth(b_bytes);
  };
  CpuAnalyticParts parts;
  // Where each K step's B sliver comes from. Rows of micro-tiles are the outer loop, so the KC×NC panel of B (packed,
  // or in place when it fits half of L2) is re-read from L2 by every row after the first; a single row of micro-tiles
  // streams B in place from wherever B lives, and an in-place panel that outgrows L2 comes from L3.
  const bool in_place = !c.pack_b;
  double b_bandwidth = kL2BytesPerCycle;
  if (in_place && tiles_m == 1) b_bandwidth = b_level;
  const double panel_room = p.signature.b.layout.kind() == LayoutKind::RowMajor
                                ? strided_panel_capacity(n * elem, nc * elem, kc, static_cast<double>(t.l2_bytes))
                                : static_cast<double>(t.l2_bytes);
  if (in_place && tiles_m > 1 && kc * nc * elem > panel_room / 2.0) b_bandwidth = kL3BytesPerCycle;
  // Each micro-tile re-reads its sliver of that panel (KC rows of NR columns), which stays in L1 only if its rows
  // spread over L1's sets. When they do not, every K step fetches its line from L2 alone (Zen 3 records: 36.5% ->
  // 25.2%, Zen 4: 12.5% -> 10.9%).
  if (in_place && tiles_m > 1 && p.signature.b.layout.kind() == LayoutKind::RowMajor &&
      kc * nr * elem > strided_panel_capacity(n * elem, std::min(nr, n) * elem, kc, static_cast<double>(t.l1d_bytes)))
    b_bandwidth = std::min(b_bandwidth, kConflictedL2BytesPerCycle);
  // B streamed in place from beyond L2 walks KC rows at once, in runs of NC columns: past the streams the prefetchers
  // follow, they fall behind in proportion.
  if (in_place && b_level == kDramBytesPerCycle && b_bandwidth < kL2BytesPerCycle)
    b_bandwidth *= std::min(1.0, kPrefetchStreams / kc);
  else if (in_place && b_level == kL3BytesPerCycle && b_bandwidth < kL2BytesPerCycle)
    b_bandwidth *= std::min(1.0, l3_prefetch_streams(t) / kc);
  // One K step of the register tile: mr·v FMAs on two FMA ports; v loads of B and mr broadcasts of A on two load
  // ports; v vectors of B from its level.
  const double step = std::max({mr * v / 2.0, (v + mr) / 2.0, v * 64.0 / b_bandwidth, 1.0});
  parts.compute = batch * tiles_m * tiles_n * (k / group) * step;
  // Per micro-tile and K slab: partial sums in and out when K spans several slabs, and the loop's bookkeeping (less
  // in a fixed-size kernel, whose trip counts are constants).
  const double slabs = tiles_of(k, c.kc);
  parts.tiles = batch * tiles_m * tiles_n * slabs * ((slabs > 1 ? 2.0 * mr * v : 0.0) + (c.fixed() ? 4.0 : 12.0));
  // Beyond the register tile: B once per MC row block (packed, or by the first row of micro-tiles; a single row
  // already counted it in its steps) unless it stays in L2, A once per NC column block, D once.
  const double row_blocks = tiles_of(m, c.mc);
  parts.b_reads = b_bytes > static_cast<double>(t.l2_bytes) ? row_blocks : 1.0;
  if (c.pack_b)  // read from its level and written to the panel, a few cycles per vector
    parts.packing = batch * (b_passes(k * tiles_n * nr * elem, row_blocks) + row_blocks * k * tiles_n * v * 2.0);
  const double b_stream = in_place && tiles_m > 1 ? b_passes(b_bytes, row_blocks) : 0.0;
  const double a_reads = tiles_of(n, c.nc);
  parts.memory = batch * (b_stream + a_bytes / a_level + a_bytes * (a_reads - 1.0) / level_bandwidth(a_bytes) +
                          d_bytes / level_bandwidth(d_bytes));
  // A call that is not a fixed-size kernel plans its grid and walks its tiles, and sets up every batch item.
  parts.call = c.fixed() ? 40.0 : 400.0 + 100.0 * batch;
  return parts;
}

double cpu_analytic_cycles(const GemmProblem& p, const CpuGemmConfig& c, const CpuTarget& t) {
  return cpu_analytic_parts(p, c, t).total();
}

namespace {
const std::vector<std::string>& absolute_feature_names() {
  static const std::vector<std::string> names{
      "log_m",           "log_n",       "log_k",       "log_batch",   "log_flops",       "mr",
      "nr_vectors",      "kc",          "log_mc",      "log_nc",      "pack_b",          "pack_a",
      "fixed",           "a_row_major", "b_row_major", "bf16",        "log_tiles_m",     "log_tiles_n",
      "log_k_slabs",     "pad_waste",   "m_edge",      "n_edge",      "k_edge",          "fma_per_load",
      "register_use",    "l1_ratio",    "l2_panel",    "b_over_l2",   "a_over_l2",       "partial_sums",
      "log_analytic",    "log_compute", "log_tiles",   "log_packing", "log_memory",      "log_b_reads",
      "memory_share",    "a_cold",      "b_cold",      "log_threads", "log_split_share", "log_split_tile_m",
      "log_split_tile_n"};
  return names;
}

std::vector<double> absolute_features(const GemmProblem& p, const CpuGemmConfig& c, const CpuTarget& t) {
  if (c.transpose) return absolute_features(transposed(p), c.untransposed(), t);
  const double m = static_cast<double>(p.m), n = static_cast<double>(p.n), k = static_cast<double>(p.k);
  const double lanes = t.vector_lanes(), mr = c.mr, nr = c.nr, v = nr / lanes;
  const double elem = dtype_bytes(p.signature.a.dtype);
  const double padded = tiles_of(m, mr) * mr * tiles_of(n, nr) * nr;
  const CpuAnalyticParts parts = cpu_analytic_parts(p, c, t);
  // The threads the call runs on and how the grid planner splits this config's tiles over them (one thread: the
  // whole problem in the largest tiles, share 1).
  const int threads = std::max(1, p.threads);
  const GridPlan split = plan_grid(p.m, p.n, p.k, p.batch, c, threads);
  const auto edge = [](double size, double tile) {
    const double rest = std::fmod(size, tile);
    return rest == 0 ? 0.0 : rest / tile;
  };
  std::vector<double> f{
      log2p(m), log2p(n), log2p(k), log2p(static_cast<double>(p.batch)), log2p(p.flops()), mr, v,
      static_cast<double>(c.kc), log2p(c.mc), log2p(c.nc), c.pack_b ? 1.0 : 0.0,
      // Without it a column-major A's packed and in-place variants looked alike: trained on
      // Aᵀ·B records, the model read 48×176×608 in place (90% slower than packing it).
      c.pack_a ? 1.0 : 0.0, c.fixed() ? 1.0 : 0.0, p.signature.a.layout.kind() == LayoutKind::RowMajor ? 1.0 : 0.0,
      p.signature.b.layout.kind() == LayoutKind::RowMajor ? 1.0 : 0.0, p.signature.a.dtype == DType::bf16 ? 1.0 : 0.0,
      log2p(tiles_of(m, mr)), log2p(tiles_of(n, nr)), log2p(tiles_of(std::max(k, 1.0), c.kc)),
      m * n > 0 ? padded / (m * n) - 1.0 : 0.0, edge(m, mr), edge(n, nr), edge(k, c.kc), mr * v / (mr + v),
      (mr * v + v + 1) / t.vector_registers(), (mr * c.kc + c.kc * nr) * elem / static_cast<double>(t.l1d_bytes),
      c.kc * std::min(static_cast<double>(c.nc), n) * elem / static_cast<double>(t.l2_bytes),
      k * n * elem / static_cast<double>(t.l2_bytes), m * k * elem / static_cast<double>(t.l2_bytes),
      k > c.kc ? std::min(static_cast<double>(c.mc), m) * std::min(static_cast<double>(c.nc), n) * 4.0 /
                     static_cast<double>(t.l2_bytes)
               : 0.0,
      std::log2(parts.total()), log2p(parts.compute), log2p(parts.tiles), log2p(parts.packing), log2p(parts.memory),
      log2p(parts.b_reads), parts.memory / (parts.compute + parts.tiles + parts.packing + parts.memory),
      p.a_cold ? 1.0 : 0.0, p.b_cold ? 1.0 : 0.0, std::log2(static_cast<double>(threads)),
      std::log2(std::max(split.time_share, 1e-6)), log2p(static_cast<double>(split.tile_m)),
      log2p(static_cast<double>(split.tile_n))};
  return f;
}

// Features compared with the whole variant space of the problem: how far a variant's estimate, and each part of it,
// is above the best in the space. They carry the analytic model's order without its scale, which is what transfers
// to shapes unlike the training ones (cpu:avx512 records, LLM family held out: top-1 regret 14.3% -> 8.8%).
constexpr std::array<const char*, 6> kRelativeFeatures{"log_analytic", "log_compute", "log_tiles",
                                                       "log_packing",  "log_memory",  "pad_waste"};

std::size_t absolute_index(const char* name) {
  const auto& names = absolute_feature_names();
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}
}  // namespace

const std::vector<std::string>& cpu_feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = absolute_feature_names();
    for (const char* name : kRelativeFeatures) all.push_back(std::string(name) + "_over_best");
    return all;
  }();
  return names;
}

std::vector<float> cpu_feature_rows(const GemmProblem& p, const std::vector<CpuGemmConfig>& configs, const CpuTarget& t,
                                    const std::vector<CpuGemmConfig>* reference) {
  // The reference: the problem's variant space (the given configs if it has none), so that a variant's features
  // do not depend on which others are ranked with it.
  std::vector<CpuGemmConfig> space = reference ? *reference : cpu_feature_reference(p, t);
  if (space.empty()) space = configs;
  std::vector<double> best(kRelativeFeatures.size(), INFINITY);
  for (const auto& c : space) {
    const std::vector<double> f = absolute_features(p, c, t);
    for (std::size_t i = 0; i < kRelativeFeatures.size(); ++i)
      best[i] = std::min(best[i], f[absolute_index(kRelativeFeatures[i])]);
  }
  std::vector<float> rows;
  rows.reserve(configs.size() * cpu_feature_names().size());
  for (const auto& c : configs) {
    const std::vector<double> f = absolute_features(p, c, t);
    rows.insert(rows.end(), f.begin(), f.end());
    for (std::size_t i = 0; i < kRelativeFeatures.size(); ++i)
      rows.push_back(static_cast<float>(f[absolute_index(kRelativeFeatures[i])] - best[i]));
  }
  return rows;
}

std::vector<float> cpu_features(const GemmProblem& p, const CpuGemmConfig& c, const CpuTarget& t) {
  return cpu_feature_rows(p, {c}, t);
}

}  // namespace tessera
