#include "generator/gemm/gemm_variants.hpp"

#include <algorithm>

#include "generator/core/error.hpp"

namespace tessera {

namespace {
template <class Config, class TargetT>
bool valid(const GemmSignature& s, const Config& c, const TargetT& t) {
  try {
    validate(s, c, t);
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

// The register tile heights of the general kernels.
constexpr int kTileRows[] = {1, 2, 4, 6, 8, 12};

template <class Config>
void add_unique(std::vector<Config>& out, const Config& c) {
  if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
}

// Fixed-size kernels for small problems: a few register tiles with the sizes compiled in.
void add_fixed_variants(const GemmProblem& p, const CpuTarget& target, const CpuGemmConfig& base,
                        std::vector<CpuGemmConfig>& out) {
  const GemmSignature& s = p.signature;
  if (!(p.m >= 1 && p.n >= 1 && p.m <= 64 && p.n <= 64 && p.k <= 64 && k_group(s) == 1)) return;
  for (auto [mr, v] : {std::pair{4, 2}, {8, 2}, {8, 1}, {16, 1}, {6, 4}, {2, 4}}) {
    CpuGemmConfig c = base;
    c.dot = false;
    c.mr = mr, c.nr = v * target.vector_lanes(), c.pack_a = false;
    c.pack_b = s.b.layout.kind() != LayoutKind::RowMajor;  // packed whole per matrix
    c.fixed_m = static_cast<int>(p.m), c.fixed_n = static_cast<int>(p.n), c.fixed_k = static_cast<int>(p.k);
    c.kc = std::max(c.fixed_k, 1);
    c.mc = (c.fixed_m + c.mr - 1) / c.mr * c.mr;
    c.nc = (c.fixed_n + c.nr - 1) / c.nr * c.nr;
    if (valid(s, c, target)) add_unique(out, c);
  }
}

// AMX tiles (on AMX targets, for bf16 and int8): every tile shape that fits the 8 tile registers, 2-16 blocks of
// 64 bytes of K per slab.
void add_amx_variants(const GemmProblem& p, const CpuTarget& target, std::vector<CpuGemmConfig>& out) {
  if (!target.amx || k_group(p.signature) == 1) return;
  const int block = is_int8(p.signature) ? 64 : 32;
  for (auto [mr, nr] : {std::pair{16, 16}, {16, 32}, {16, 48}, {32, 16}, {32, 32}})
    for (int blocks : {2, 4, 8, 16}) {
      const CpuGemmConfig c = amx_config(p, target, mr, nr, blocks * block);
      if (valid(p.signature, c, target)) add_unique(out, c);
    }
}

// The configs that compute D = A·B as it is (not transposed).
std::vector<CpuGemmConfig> direct_variants(const GemmProblem& p, const CpuTarget& target, bool prune) {
  const GemmSignature& s = p.signature;
  CpuGemmConfig base = CpuGemmConfig::default_for(p, target).untransposed();
  base.amx = CpuGemmConfig::kAmxNone;  // the vector variants below; AMX ones come from add_amx_variants
  std::vector<CpuGemmConfig> out;
  const int lanes = target.vector_lanes();
  const int group = k_group(s);  // bf16 and int8 read A in place and pack B in groups along K
  if (dot_kernel_fits(p)) {
    // Dot kernels only: the tiles around default_for's, one and several K slabs. (The shipped model was trained
    // on the other kernels; among these it ranks by the raw tile parameters.)
    for (auto [mr, nr] : {std::pair{1, 8}, {2, 8}, {3, 8}, {4, 4}, {4, 6}, {5, 5}})
      for (int kc : {256, 1024, 4096}) {
        CpuGemmConfig c = base;
        c.dot = true, c.pack_a = c.pack_b = false, c.k_unroll = 2, c.nc = 240;
        c.mr = mr, c.nr = nr, c.kc = kc;
        c.mc = static_cast<int>((p.m + mr - 1) / mr * mr);
        if (valid(s, c, target)) add_unique(out, c);
      }
    // Small problems (batched ones: the dot kernels run one matrix) also get the fixed-size kernels: with only the
    // dot tiles, a small A·Bᵀ's space was default_for's one kernel.
    add_fixed_variants(p, target, base, out);
    add_amx_variants(p, target, out);
    return out;
  }
  std::vector<int> vector_counts = {1, 2, 3, 4};
  if (p.m <= 8) vector_counts.insert(vector_counts.end(), {10, 15});  // wide GEMV-like tiles
  // A without contiguous rows (column-major) is also packed: read in place, the rows of an MR tile lie a column
  // apart, often a multiple of 4 KiB, all in one L1 set (1 thread, 1024³ Aᵀ·B: 93 GFLOP/s in place, 146-154 packed).
  const bool a_rows_contiguous = s.a.layout.kind() == LayoutKind::RowMajor;
  for (int mr : kTileRows)
    for (int v : vector_counts)
      for (int kc : {64, 128, 256, 384})
        for (bool pack_b : {true, false})
          for (bool pack_a : {false, true}) {
            if (group > 1 && !pack_b) continue;
            if (pack_a && (a_rows_contiguous || group > 1)) continue;
            CpuGemmConfig c = base;
            c.fixed_m = c.fixed_n = c.fixed_k = 0;
            c.mr = mr;
            c.nr = v * lanes;
            c.kc = group * kc;
            c.pack_a = pack_a;
            c.pack_b = pack_b;
            c.k_unroll = 4;
            // MC/NC from the caches, as default_for derives them: B's KC×NC panel in half of L2; N-wide panels for
            // skinny tiles.
            c.nc = mr <= 2
                       ? static_cast<int>(std::clamp<std::int64_t>((p.n + c.nr - 1) / c.nr * c.nr, c.nr, 64 * c.nr))
                       : std::clamp(static_cast<int>(target.l2_bytes / 2 / (4 * c.kc)) / c.nr * c.nr, c.nr, 32 * c.nr);
            c.mc = std::max(c.mr, 1024 / c.mr * c.mr);
            if (!(prune && recomputes_rows(p, c)) && valid(s, c, target)) add_unique(out, c);
          }
  add_fixed_variants(p, target, base, out);
  add_amx_variants(p, target, out);
  return out;
}
}  // namespace

bool recomputes_rows(const GemmProblem& p, const CpuGemmConfig& c) {
  if (c.fixed() || c.dot) return false;  // fixed kernels compute only the live rows; dot tiles are not row tiles
  const std::int64_t rows = c.transpose ? p.n : p.m;
  for (int mr : kTileRows)
    if (mr >= rows) return c.mr > mr;
  return false;
}

bool packs_b_for_few_rows(const GemmProblem& p, const CpuGemmConfig& c) {
  if (c.fixed() || c.dot || !c.pack_b || k_group(p.signature) > 1) return false;
  const GemmProblem computed = c.transpose ? transposed(p) : p;
  return computed.m <= 2 && computed.signature.b.layout.kind() == LayoutKind::RowMajor;
}

bool outside_space(const GemmProblem& p, const CpuGemmConfig& c) {
  return recomputes_rows(p, c) || packs_b_for_few_rows(p, c);
}

namespace {
std::vector<CpuGemmConfig> enumerate_cpu(const GemmProblem& p, const CpuTarget& target, bool prune) {
  std::vector<CpuGemmConfig> out;
  if (const CpuGemmConfig base = CpuGemmConfig::default_for(p, target); valid(p.signature, base, target))
    out.push_back(base);
  for (const CpuGemmConfig& c : direct_variants(p, target, prune)) add_unique(out, c);
  // With B column-major, the transposed product (Dᵀ = Bᵀ·Aᵀ) is the other way to tile it: its own variants.
  if (p.signature.a.dtype == DType::f32 && p.signature.b.layout.kind() == LayoutKind::ColMajor)
    for (CpuGemmConfig c : direct_variants(transposed(p), target, prune)) {
      c.transpose = true;
      if (valid(p.signature, c, target)) add_unique(out, c);
    }
  // bf16 x·Wᵀ on AMX: the transposed product's tiles too (W's rows are then A tiles read along K).
  if (k_group(p.signature) == 2 && target.amx && p.signature.b.layout.kind() == LayoutKind::ColMajor) {
    std::vector<CpuGemmConfig> tiles;
    add_amx_variants(transposed(p), target, tiles);
    for (CpuGemmConfig c : tiles) {
      c.transpose = true;
      if (valid(p.signature, c, target)) add_unique(out, c);
    }
  }
  // On AVX-512, a problem with fixed-size kernels runs fastest with one of them: in the Xeon's records (50 problems of
  // at most 64 in each dimension, every layout) the best general kernel took 1.02-2.1× the best fixed one's time, on
  // the Zen 4 (31 problems) never less. Left in, the general ones were a way for the model to be wrong: Aᵀ·Bᵀ
  // 40³×128, its pick a general 8×48 tile at 87 GFLOP/s against 101 for the fixed one. (On the Zen 3's AVX2, 24³ ran
  // 20% faster on a general kernel: kept there.)
  const auto fixed = [](const CpuGemmConfig& c) { return c.fixed(); };
  if (prune && target.isa == CpuIsa::Avx512 && std::any_of(out.begin(), out.end(), fixed))
    std::erase_if(out, [&](const CpuGemmConfig& c) { return !fixed(c); });
  // default_for's choice (first) stays whatever it is.
  if (prune && out.size() > 1)
    out.erase(
        std::remove_if(out.begin() + 1, out.end(), [&](const CpuGemmConfig& c) { return packs_b_for_few_rows(p, c); }),
        out.end());
  return out;
}

}  // namespace

std::vector<CpuGemmConfig> cpu_variants(const GemmProblem& p, const CpuTarget& target) {
  return enumerate_cpu(p, target, true);
}

std::vector<CpuGemmConfig> cpu_feature_reference(const GemmProblem& p, const CpuTarget& target) {
  return enumerate_cpu(p, target, false);
}

std::vector<CudaGemmConfig> cuda_variants(const GemmProblem& p, const CudaTarget& target) {
  const GemmSignature& s = p.signature;
  const CudaGemmConfig base = CudaGemmConfig::default_for(p, target);
  std::vector<CudaGemmConfig> out;
  if (valid(s, base, target)) out.push_back(base);
  struct Tile {
    int bm, bn, wm, wn;
  };
  const std::vector<Tile> tiles = {
      {64, 64, 32, 32},   {128, 64, 64, 32},  {64, 128, 32, 64},  {128, 128, 64, 64},
      {128, 128, 64, 32}, {128, 256, 64, 64}, {256, 128, 64, 64}, {256, 64, 64, 32},
      {64, 256, 32, 64},  {16, 128, 16, 32},  {32, 128, 32, 32}};  // skinny M: decoding's linear layers
  const int elem = dtype_bytes(s.a.dtype);
  for (const Tile& t : tiles)
    for (int stages : base.math == CudaMath::Simt ? std::vector<int>{2} : std::vector<int>{2, 3, 4, 5})
      for (int bk_bytes : {32, 64, 128})
        for (int split : {1, 2, 4, 8})
          for (int swizzle : {1, 8}) {
            CudaGemmConfig c = base;
            if (c.math == CudaMath::Wgmma) c.math = cuda_math_for(s);  // mma.sync tiles stay candidates on sm_90a
            c.tma_store = false;
            c.block_m = t.bm, c.block_n = t.bn, c.warp_m = t.wm, c.warp_n = t.wn;
            c.stages = stages;
            c.block_k = base.math == CudaMath::Simt ? bk_bytes / 4 : bk_bytes / elem;
            c.split_k = split;
            c.swizzle = swizzle;
            if (split > 1 && p.k < 4 * split * c.block_k) continue;  // too shallow to share
            if (valid(s, c, target)) add_unique(out, c);
            // Stream-K in place of split-K: one or two blocks per SM sharing the iterations of every tile or of the
            // last wave or two.
            if (split == 1 && c.math == CudaMath::TensorOp)
              for (int stream : {1, 2})
                for (int waves : {0, 1, 2}) {
                  CudaGemmConfig streamed = c;
                  streamed.stream_k = stream, streamed.stream_k_waves = waves;
                  if (valid(s, streamed, target)) add_unique(out, streamed);
                }
          }
  // Hopper's warp-specialised kernel: one or two consumer warpgroups, 64- to 256-wide warpgroup tiles, 2..8 stages,
  // K split up to 8 ways where it is deep enough, or stream-K.
  if (base.math == CudaMath::Wgmma)
    for (int bm : {64, 128})
      for (int bn : {64, 128, 256})
        for (int stages = 2; stages <= 8; ++stages)
          for (int split : {1, 2, 4, 8})
            for (int swizzle : {1, 8}) {
              CudaGemmConfig c = base;
              c.block_m = bm, c.block_n = c.warp_n = bn, c.warp_m = 64, c.block_k = 128 / elem;
              c.stages = stages, c.swizzle = swizzle, c.split_k = split, c.stream_k = 0;
              if (split > 1 && p.k < 4 * split * c.block_k) continue;
              if (valid(s, c, target)) add_unique(out, c);
              // Clusters of 2 along M (B multicast) or N (A multicast), or 2 x 2; stream-K with each.
              for (const auto& [cm, cn] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
                CudaGemmConfig clustered = c;
                clustered.cluster_m = cm, clustered.cluster_n = cn;
                if (cm * cn > 1 && valid(s, clustered, target)) add_unique(out, clustered);
                if (split == 1)
                  for (int waves : {0, 1}) {
                    CudaGemmConfig streamed = clustered;
                    streamed.stream_k = 1, streamed.stream_k_waves = waves;
                    if (valid(s, streamed, target)) add_unique(out, streamed);
                  }
              }
            }
  return out;
}

}  // namespace tessera
