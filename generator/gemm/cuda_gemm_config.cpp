#include "generator/gemm/cuda_gemm_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "generator/core/arith.hpp"
#include "generator/core/config_overrides.hpp"
#include "generator/core/error.hpp"
#include "generator/core/tile_grid.hpp"
#include "generator/gemm/cuda_gemm_model.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace tessera {

namespace {
bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

// In-memory element size of A and B (tf32 is stored as f32).
int input_bytes(const GemmSignature& s) { return dtype_bytes(s.a.dtype); }

bool k_contiguous(const Layout& layout, bool is_a) {
  return layout.kind() == (is_a ? LayoutKind::RowMajor : LayoutKind::ColMajor);
}

// The widest vector (16, 8 or 4 bytes, in elements) that divides a packed operand's contiguous extent.
int natural_alignment(std::int64_t extent, int elem_bytes) {
  for (int bytes : {16, 8, 4})
    if (bytes >= elem_bytes && extent % (bytes / elem_bytes) == 0) return bytes / elem_bytes;
  return 1;
}

// Whether each tile a cluster shares splits into its parts (validate's rule): K-major, whole 8-row atoms a part;
// M/N-major, whole 64-wide slices.
bool multicast_parts_fit(const GemmSignature& s, const CudaGemmConfig& c) {
  for (const auto& [rows, parts, k_major] : {std::tuple{c.block_m, c.cluster_n, k_contiguous(s.a.layout, true)},
                                             std::tuple{c.block_n, c.cluster_m, k_contiguous(s.b.layout, false)}})
    if (parts > 1 && (k_major ? rows % (8 * parts) : (rows / 64) % parts)) return false;
  return true;
}
}  // namespace

std::string_view cuda_math_name(CudaMath math) {
  return math == CudaMath::Simt ? "simt" : math == CudaMath::Wgmma ? "wgmma" : "tensorop";
}

bool wgmma_supports(const GemmSignature& s, const CudaTarget& target) {
  const auto dense = [](const Layout& l) {
    return l.kind() == LayoutKind::RowMajor || l.kind() == LayoutKind::ColMajor;
  };
  // tf32 has no transpose: both operands K-major.
  const bool tf32_k_major =
      s.a.dtype == DType::tf32 && k_contiguous(s.a.layout, true) && k_contiguous(s.b.layout, false);
  return target.sm >= 90 && target.arch_specific &&
         (s.a.dtype == DType::f16 || s.a.dtype == DType::bf16 || tf32_k_major) && dense(s.a.layout) &&
         dense(s.b.layout);
}

CudaMath cuda_math_for(const GemmSignature& s) { return s.a.dtype == DType::f32 ? CudaMath::Simt : CudaMath::TensorOp; }

int mma_k(const GemmSignature& s) { return s.a.dtype == DType::tf32 ? 8 : 16; }

std::int64_t CudaGemmConfig::shared_bytes(const GemmSignature& s) const {
  const std::int64_t elem = input_bytes(s);
  const std::int64_t pipeline = std::int64_t{stages} * (block_m + block_n) * block_k * elem;
  // The SIMT kernel pads each shared row of A and of B by 4 floats (gemm_simt.cuh: SimtShape).
  if (math == CudaMath::Simt) return std::int64_t{stages} * (block_m + 4 + block_n + 4) * block_k * elem;
  // wgmma: the ring, then a full and an empty mbarrier per stage; the epilogue's slabs reuse the ring.
  if (math == CudaMath::Wgmma) return pipeline + 16 * stages;
  // The epilogue stages one 16-row slab of each warp's accumulators (rows padded by 8 floats against bank conflicts).
  const std::int64_t staging = std::int64_t{warps()} * 16 * (warp_n + 8) * 4;
  return std::max(pipeline, staging);
}

std::int64_t CudaGemmConfig::workspace_bytes(const GemmProblem& p, const CudaTarget& target) const {
  if (stream_k > 0) {
    // The pieces' partial sums, then a 4-byte flag per output tile (16-byte aligned).
    const StreamKPlan plan = stream_k_plan(p, *this, target);
    return stream_k_flags_offset(p, *this, target) + plan.shared_tiles * plan.cluster * 4;
  }
  if (split_k <= 1) return 0;
  return std::int64_t{split_k} * p.batch * p.m * p.n * 4;
}

int resident_blocks(const GemmSignature& s, const CudaGemmConfig& c, const CudaTarget& t) {
  const std::int64_t smem = c.shared_bytes(s);
  const std::int64_t by_smem = smem > 0 ? t.shared_per_sm / (smem + 1024) : 32;
  const std::int64_t by_regs = t.registers_per_sm / (std::int64_t{std::min(c.register_estimate(), 255)} * c.threads());
  return static_cast<int>(
      std::max<std::int64_t>(1, std::min({by_smem, by_regs, 2048 / std::int64_t{c.threads()}, std::int64_t{32}})));
}

StreamKPlan stream_k_plan(const GemmProblem& p, const CudaGemmConfig& c, const CudaTarget& t) {
  StreamKPlan plan;
  plan.cluster = std::int64_t{c.cluster_m} * c.cluster_n;
  plan.tiles = TileGrid{ceil_div(p.m, c.block_m), ceil_div(p.n, c.block_n), c.cluster_m, c.cluster_n, p.batch}.count();
  // A K of 0 still gives each tile one (empty) step, whose epilogue writes D.
  plan.k_tiles = std::max<std::int64_t>(1, ceil_div(p.k, c.block_k));
  // At least one unit: a target of fewer SMs than a cluster's blocks still runs the problem.
  const std::int64_t grid =
      std::max<std::int64_t>(1, std::int64_t{t.sm_count} * std::max(1, c.stream_k) / plan.cluster);
  // The hybrid: the waves before the last stream_k_waves go whole to the units.
  const std::int64_t whole =
      c.stream_k_waves > 0 ? std::max<std::int64_t>(0, ceil_div(plan.tiles, grid) - c.stream_k_waves) * grid : 0;
  plan.shared_tiles = plan.tiles - whole;
  plan.total = plan.shared_tiles * plan.k_tiles;
  plan.units = whole > 0 ? grid : std::min(plan.total, grid);
  plan.blocks = plan.units * plan.cluster;
  if (plan.units == 0) return plan;
  plan.iterations = static_cast<double>(plan.total) / static_cast<double>(plan.units);
  // Unit u walks [u·total/units, (u+1)·total/units): at least floor(total/units) steps, so a tile of k_tiles steps
  // meets at most ceil(k_tiles / that) + 1 units.
  const std::int64_t least = std::max<std::int64_t>(1, plan.total / plan.units);
  plan.pieces = std::min(plan.units, ceil_div(plan.k_tiles, least) + 1);
  return plan;
}

std::int64_t stream_k_flags_offset(const GemmProblem& p, const CudaGemmConfig& c, const CudaTarget& t) {
  return (stream_k_plan(p, c, t).pieces * p.batch * p.m * p.n * 4 + 15) / 16 * 16;
}

std::int64_t cuda_grid_blocks(const GemmProblem& p, const CudaGemmConfig& c) {
  const std::int64_t tiles_m = ceil_div(p.m, c.block_m), tiles_n = ceil_div(p.n, c.block_n);
  return ceil_div(tiles_m, c.cluster_m) * c.cluster_m * ceil_div(tiles_n, c.cluster_n) * c.cluster_n * p.batch *
         c.split_k;
}

double last_wave_idle(const GemmProblem& p, const CudaGemmConfig& c, const CudaTarget& t) {
  if (c.stream_k > 0) return 0;
  const std::int64_t blocks = cuda_grid_blocks(p, c);
  if (blocks == 0) return 0;
  const std::int64_t slots = std::int64_t{t.sm_count} * resident_blocks(p.signature, c, t);
  const std::int64_t last = blocks - (ceil_div(blocks, slots) - 1) * slots;
  return 1.0 - static_cast<double>(std::min<std::int64_t>(last, t.sm_count)) / t.sm_count;
}

int CudaGemmConfig::register_estimate() const {
  if (math == CudaMath::Simt) {
    const int tm = warp_m / 8, tn = warp_n / 4;
    return tm * tn + 2 * (tm + tn) + 40;
  }
  // A consumer thread holds block_n / 2 accumulators; operands stay in shared memory. Stream-K's piece, ring count
  // and hand-over keep about 16 more live across the main loop (ptxas, sm_90a, 128 x 256 with stream-K at the 168
  // registers a thread of 384 gets: 528 bytes of spills, the same tile without stream-K none).
  if (math == CudaMath::Wgmma) return block_n / 2 + 40 + (stream_k > 0 ? 16 : 0);
  const int mi = warp_m / 16, ni = warp_n / 8;
  // Accumulators (4 floats per 16×8 tile), double-buffered A (4 regs per 16×16) and B (2 per 16×8) fragments.
  return mi * ni * 4 + 2 * (mi * 4 + ni * 2) + 40;
}

CudaGemmConfig CudaGemmConfig::default_for(const GemmProblem& p, const CudaTarget& target) {
  const GemmSignature& s = p.signature;
  CudaGemmConfig c;
  c.math = cuda_math_for(s);
  const int elem = input_bytes(s);
  if (c.math == CudaMath::Simt) {
    c.block_m = 128, c.block_n = 128, c.block_k = 8, c.warp_m = 64, c.warp_n = 32, c.stages = 2;
    if (TileGrid{p.m, p.n, 128, 128, p.batch}.count() < target.sm_count)
      c.block_m = 64, c.block_n = 64, c.warp_m = 32, c.warp_n = 32;
  } else if (wgmma_supports(s, target) &&
             natural_alignment(k_contiguous(s.a.layout, true) ? p.k : p.m, elem) * elem == 16 &&
             natural_alignment(k_contiguous(s.b.layout, false) ? p.k : p.n, elem) * elem == 16) {
    // Hopper: 64-deep K (one 128-byte swizzle row) and as many stages as fit (up to 6); of the warpgroup tiles
    // (64 or 128 rows, 64 to 256 columns), each with K split 1 to 16 ways where the tiles leave SMs idle and K is
    // deep enough to share (at least 4 k-tiles a split), or stream-K where the last wave would leave more than a
    // tenth of the SMs idle, the analytic model's fastest for the problem.
    c.math = CudaMath::Wgmma;
    c.block_k = 128 / elem, c.warp_m = 64, c.align_a = c.align_b = 16 / elem;
    double best = INFINITY;
    CudaGemmConfig chosen = c;
    for (int bm : {128, 64})
      for (int bn : {128, 256, 64})
        for (int split : {1, 2, 4, 8, 16}) {
          const std::int64_t tiles = TileGrid{p.m, p.n, bm, bn, p.batch}.count();
          if (split > 1 && (tiles * split > 2 * target.sm_count || p.k < 4 * split * c.block_k)) continue;
          CudaGemmConfig t = c;
          t.block_m = bm, t.block_n = t.warp_n = bn, t.stages = 6, t.split_k = split;
          while (t.stages > 2 && t.shared_bytes(s) > target.max_shared_per_block) --t.stages;
          t.swizzle = TileGrid{p.m, p.n, bm, bn, p.batch}.rows() >= 8 ? 8 : 1;
          if (const double seconds = cuda_analytic_seconds(p, t, target); seconds < best) best = seconds, chosen = t;
          // Clusters of two along M or N (or 2 x 2), whose multicast halves the L2 reads of the shared operand, where
          // their grid (padded to whole clusters) leaves at most a tenth of the SMs idle in its last wave, or no more
          // than the same tiles without clusters (a candidate above) leave; the fillers below (stream-K, over
          // blocks or clusters) compete with them.
          const double idle = std::max(0.1, last_wave_idle(p, t, target));
          for (const auto& [cm, cn] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
            CudaGemmConfig clustered = t;
            clustered.cluster_m = cm, clustered.cluster_n = cn;
            if (!multicast_parts_fit(s, clustered) || last_wave_idle(p, clustered, target) > idle) continue;
            if (const double seconds = cuda_analytic_seconds(p, clustered, target); seconds < best)
              best = seconds, chosen = clustered;
          }
          if (split > 1 || last_wave_idle(p, t, target) <= 0.1) continue;
          // Stream-K, its units blocks or clusters (whose multicast it keeps), where the model finds it faster
          // than the same tiles without it.
          for (const auto& [cm, cn] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
            CudaGemmConfig same = t;
            same.cluster_m = cm, same.cluster_n = cn;
            if (cm * cn > 1 && !multicast_parts_fit(s, same)) continue;
            const double without = cuda_analytic_seconds(p, same, target);
            for (int stream = 1; stream <= std::min(2, resident_blocks(s, t, target)); ++stream)
              for (int waves : {0, 1, 2}) {
                CudaGemmConfig streamed = same;
                streamed.stream_k = stream, streamed.stream_k_waves = waves;
                if (std::int64_t{streamed.register_estimate()} * streamed.threads() > target.registers_per_sm) continue;
                if (const double seconds = cuda_analytic_seconds(p, streamed, target);
                    seconds < best && seconds < without)
                  best = seconds, chosen = streamed;
              }
          }
        }
    c = chosen;
  } else {
    // 128-byte rows of K per stage, as CUTLASS's sm80 defaults: 64 f16/bf16 or 32 tf32 elements, four mma k-steps
    // per barrier.
    c.block_k = 128 / elem;
    const bool big_smem = target.max_shared_per_block > 160 * 1024;
    const std::int64_t tiles128 = TileGrid{p.m, p.n, 128, 128, p.batch}.count();
    if (p.m <= 32) {
      // Skinny M (a decoding step's linear layers): 16- or 32-row tiles instead of 64 rows mostly padding.
      c.block_m = c.warp_m = p.m <= 16 ? 16 : 32, c.block_n = 128, c.warp_n = 32;
    } else if (tiles128 < target.sm_count / 2) {
      c.block_m = 64, c.block_n = 64, c.warp_m = 32, c.warp_n = 32;
    } else if (big_smem && tiles128 >= 2 * target.sm_count && p.n >= 256) {
      c.block_n = 256;  // 8 warps of 64×64: more reuse per byte of shared memory once the grid is several waves
    }
    // As many stages as fit, up to 4 (3 at least where a 16-bit 128×256 tile allows it).
    c.stages = 4;
    while (c.stages > 2 && c.shared_bytes(s) > target.max_shared_per_block) --c.stages;
  }
  // Split K when the output grid leaves most SMs idle and K is deep enough to share.
  const std::int64_t tiles = TileGrid{p.m, p.n, c.block_m, c.block_n, p.batch}.count();
  if (c.math != CudaMath::Wgmma && tiles * 2 <= target.sm_count && p.k >= 8 * c.block_k) {
    const std::int64_t by_sms = ceil_div(target.sm_count, tiles);
    const std::int64_t by_k = p.k / (4 * c.block_k);
    c.split_k = static_cast<int>(std::clamp<std::int64_t>(std::min(by_sms, by_k), 1, 16));
  }
  c.swizzle = TileGrid{p.m, p.n, c.block_m, c.block_n, p.batch}.rows() >= 8 ? 8 : 1;
  c.align_a = natural_alignment(k_contiguous(s.a.layout, true) ? p.k : p.m, elem);
  c.align_b = natural_alignment(k_contiguous(s.b.layout, false) ? p.k : p.n, elem);
  const int out_elem = dtype_bytes(s.d.dtype);
  c.align_c = natural_alignment(s.d.layout.kind() == LayoutKind::RowMajor ? p.n : p.m, out_elem);
  // Hopper stores D's tiles by TMA where its rows allow (row-major, 16-byte aligned).
  c.tma_store = c.math == CudaMath::Wgmma && s.d.layout.kind() == LayoutKind::RowMajor && c.align_c * out_elem == 16 &&
                !(c.stream_k > 0 && c.cluster_m * c.cluster_n > 1);
  // Where the last wave would leave more than a tenth of the SMs idle, the model picks among this grid, the same
  // without split-K, and stream-K with one or two blocks per SM, over every tile or only the last one or two waves'
  // (the tail it removes against its pieces' round trip through L2).
  if (c.math == CudaMath::TensorOp && last_wave_idle(p, c, target) > 0.1) {
    std::vector<CudaGemmConfig> candidates{c};
    CudaGemmConfig unsplit = c;
    unsplit.split_k = 1;
    candidates.push_back(unsplit);
    for (int stream = 1; stream <= std::min(2, resident_blocks(s, c, target)); ++stream)
      for (int waves : {0, 1, 2}) {
        CudaGemmConfig streamed = unsplit;
        streamed.stream_k = stream, streamed.stream_k_waves = waves;
        candidates.push_back(streamed);
      }
    double best = INFINITY;
    for (const CudaGemmConfig& candidate : candidates)
      if (const double seconds = cuda_analytic_seconds(p, candidate, target); seconds < best)
        best = seconds, c = candidate;
  }
  return c;
}

CudaGemmConfig CudaGemmConfig::with_overrides(const std::string& text) const {
  CudaGemmConfig c = *this;
  const auto overrides = parse_config_overrides(text);
  // Stream-K splits K itself: asking for either drops the default's other unless both are given.
  const auto given = [&](const char* key) {
    return std::any_of(overrides.begin(), overrides.end(), [&](const auto& kv) { return kv.first == key; });
  };
  if (given("stream_k") && !given("split_k")) c.split_k = 1;
  if (given("split_k") && !given("stream_k")) c.stream_k = 0;
  for (const auto& [key, value] : overrides) {
    if (key == "block_m")
      c.block_m = value;
    else if (key == "block_n")
      c.block_n = value;
    else if (key == "block_k")
      c.block_k = value;
    else if (key == "warp_m")
      c.warp_m = value;
    else if (key == "warp_n")
      c.warp_n = value;
    else if (key == "stages")
      c.stages = value;
    else if (key == "split_k")
      c.split_k = value;
    else if (key == "swizzle")
      c.swizzle = value;
    else if (key == "align_a")
      c.align_a = value;
    else if (key == "align_b")
      c.align_b = value;
    else if (key == "align_c")
      c.align_c = value;
    else if (key == "stream_k")
      c.stream_k = value;
    else if (key == "stream_k_waves")
      c.stream_k_waves = value;
    else if (key == "tma_store")
      c.tma_store = value != 0;
    else if (key == "cluster_m")
      c.cluster_m = value;
    else if (key == "cluster_n")
      c.cluster_n = value;
    else if (key == "simt")
      c.math = value ? CudaMath::Simt : CudaMath::TensorOp;
    else if (key == "wgmma")
      c.math = value ? CudaMath::Wgmma : CudaMath::TensorOp;
    else
      throw InvalidArgument(
          "config", "unknown key '" + key +
                        "' (block_m, block_n, block_k, warp_m, warp_n, stages, split_k, stream_k, stream_k_waves, "
                        "swizzle, "
                        "align_a, align_b, align_c, simt, wgmma, tma_store, cluster_m, cluster_n)");
  }
  if (c.stream_k == 0 && !given("stream_k_waves")) c.stream_k_waves = 0;
  return c;
}

nlohmann::json to_json(const CudaGemmConfig& config) {
  nlohmann::json j{{"math", cuda_math_name(config.math)},
                   {"block_m", config.block_m},
                   {"block_n", config.block_n},
                   {"block_k", config.block_k},
                   {"warp_m", config.warp_m},
                   {"warp_n", config.warp_n},
                   {"stages", config.stages},
                   {"split_k", config.split_k},
                   {"swizzle", config.swizzle},
                   {"align_a", config.align_a},
                   {"align_b", config.align_b},
                   {"align_c", config.align_c}};
  if (config.stream_k > 0) j["stream_k"] = config.stream_k;  // absent when off: older specs keep their hashes
  if (config.stream_k_waves > 0) j["stream_k_waves"] = config.stream_k_waves;
  if (config.tma_store) j["tma_store"] = true;
  if (config.cluster_m > 1) j["cluster_m"] = config.cluster_m;
  if (config.cluster_n > 1) j["cluster_n"] = config.cluster_n;
  return j;
}

template <>
CudaGemmConfig from_json<CudaGemmConfig>(const nlohmann::json& j) {
  CudaGemmConfig c;
  const std::string math = j.at("math").get<std::string>();
  if (math != "simt" && math != "tensorop" && math != "wgmma")
    throw InvalidArgument("config.math", "must be simt, tensorop or wgmma");
  c.math = math == "simt" ? CudaMath::Simt : math == "wgmma" ? CudaMath::Wgmma : CudaMath::TensorOp;
  c.block_m = integer_at<int>(j, "block_m");
  c.block_n = integer_at<int>(j, "block_n");
  c.block_k = integer_at<int>(j, "block_k");
  c.warp_m = integer_at<int>(j, "warp_m");
  c.warp_n = integer_at<int>(j, "warp_n");
  c.stages = integer_at<int>(j, "stages");
  c.split_k = integer_at<int>(j, "split_k");
  c.swizzle = integer_at<int>(j, "swizzle");
  c.align_a = integer_at<int>(j, "align_a");
  c.align_b = integer_at<int>(j, "align_b");
  c.align_c = integer_at<int>(j, "align_c");
  if (j.contains("stream_k")) c.stream_k = integer_at<int>(j, "stream_k");
  if (j.contains("stream_k_waves")) c.stream_k_waves = integer_at<int>(j, "stream_k_waves");
  if (j.contains("tma_store")) {
    if (!j.at("tma_store").is_boolean()) throw InvalidArgument("config.tma_store", "must be true or false");
    c.tma_store = j.at("tma_store").get<bool>();
  }
  if (j.contains("cluster_m")) c.cluster_m = integer_at<int>(j, "cluster_m");
  if (j.contains("cluster_n")) c.cluster_n = integer_at<int>(j, "cluster_n");
  return c;
}

void validate(const GemmSignature& s, const CudaGemmConfig& c, const CudaTarget& target) {
  const auto fail = [](const std::string& rule) { throw ConfigError(rule); };
  const std::string where = target.str();
  // Types: the inputs decide the math; the output is f32 or the input's 16-bit type.
  if (s.a.dtype != s.b.dtype)
    fail(
        fmt::format("A and B dtypes must match on {} ({} vs {})", where, dtype_name(s.a.dtype), dtype_name(s.b.dtype)));
  const DType in = s.a.dtype;
  if (in != DType::f32 && in != DType::f16 && in != DType::bf16 && in != DType::tf32)
    fail(fmt::format("input dtype {} is not supported on {} (f32, tf32, f16 or bf16)", dtype_name(in), where));
  if (s.accumulator != DType::f32) fail("the accumulator must be f32");
  for (const auto& [name, dtype] : {std::pair{"C", s.c.dtype}, std::pair{"D", s.d.dtype}}) {
    const bool ok = dtype == DType::f32 || ((in == DType::f16 || in == DType::bf16) && dtype == in);
    if (!ok)
      fail(fmt::format("{} dtype {} is not supported with {} inputs (f32{})", name, dtype_name(dtype), dtype_name(in),
                       in == DType::f16 || in == DType::bf16 ? std::string(" or ") + std::string(dtype_name(in)) : ""));
  }
  if (s.c.layout.reads_memory() && s.c.dtype != s.d.dtype) fail("C and D dtypes must match");
  if (s.inputs.size() > 8) fail(fmt::format("{} epilogue tensors: CUDA kernels take at most 8", s.inputs.size()));
  for (const auto& input : s.inputs)
    if (input.operand.dtype != DType::f32)
      fail(fmt::format("epilogue tensor '{}' must be f32 on {}", input.name, where));
  if (c.math == CudaMath::Wgmma) {
    if (!wgmma_supports(s, target))
      fail(
          fmt::format("wgmma math needs sm_90a (not {}) and f16 or bf16 inputs in row- or column-major A and B, or "
                      "tf32 with row-major A and column-major B",
                      where));
  } else if (c.math != cuda_math_for(s)) {
    fail(fmt::format("{} inputs need {} math, not {}", dtype_name(in), cuda_math_name(cuda_math_for(s)),
                     cuda_math_name(c.math)));
  }
  // Layouts: the tiles are copied with vector accesses along a contiguous dimension.
  for (const auto& [name, layout] : {std::pair{"A", s.a.layout}, std::pair{"B", s.b.layout}})
    if (layout.kind() != LayoutKind::RowMajor && layout.kind() != LayoutKind::ColMajor)
      fail(fmt::format("{} layout must be row or col on {}, not {}", name, where, layout.name()));
  if (s.c.layout.kind() == LayoutKind::Strided) fail(fmt::format("C layout must be row, col or zero on {}", where));
  if (s.d.layout.kind() != LayoutKind::RowMajor && s.d.layout.kind() != LayoutKind::ColMajor)
    fail(fmt::format("D layout must be row or col, not {}", s.d.layout.name()));
  if (s.c.layout.reads_memory() && s.c.layout != s.d.layout)
    fail("C and D layouts must match on CUDA (the epilogue reads C with D's vector accesses)");

  // Tiles.
  const int elem = input_bytes(s);
  for (const auto& [name, v] :
       {std::pair{"block_m", c.block_m}, std::pair{"block_n", c.block_n}, std::pair{"block_k", c.block_k},
        std::pair{"warp_m", c.warp_m}, std::pair{"warp_n", c.warp_n}})
    if (!is_pow2(v) || v > 512) fail(fmt::format("{} ({}) must be a power of two up to 512", name, v));
  if (c.block_m % c.warp_m || c.block_n % c.warp_n)
    fail(fmt::format("the block tile {}x{} must be a multiple of the warp tile {}x{}", c.block_m, c.block_n, c.warp_m,
                     c.warp_n));
  if (c.threads() > target.max_threads_per_block)
    fail(fmt::format("{} warps ({} threads) exceed {} threads per block", c.warps(), c.threads(),
                     target.max_threads_per_block));
  if (c.math == CudaMath::Wgmma) {
    if (c.block_m != 64 && c.block_m != 128)
      fail(fmt::format("wgmma block_m ({}) must be 64 or 128 (one or two consumer warpgroups)", c.block_m));
    if (c.block_n != 64 && c.block_n != 128 && c.block_n != 256)
      fail(fmt::format("wgmma block_n ({}) must be 64, 128 or 256", c.block_n));
    if (c.warp_m != 64 || c.warp_n != c.block_n)
      fail(fmt::format("wgmma warp tile must be 64 x block_n (a warpgroup's), not {}x{}", c.warp_m, c.warp_n));
    if (c.block_k * elem != 128)
      fail(fmt::format("wgmma block_k ({}) must span 128 bytes (the swizzle row)", c.block_k));
    if (c.stages < 2 || c.stages > 8) fail(fmt::format("wgmma stages ({}) must be in 2..8", c.stages));
    if (c.align_a * elem != 16 || c.align_b * elem != 16)
      fail(fmt::format("the wgmma kernel's TMA copies need A and B 16-byte aligned (align_a and align_b of {})",
                       16 / elem));
    // The epilogue's slabs (16 rows of block_n + 8 floats per consumer warp) reuse the ring.
    const std::int64_t slabs = std::int64_t{c.block_m / 64} * 4 * 16 * (c.block_n + 8) * 4;
    if (slabs > std::int64_t{c.stages} * (c.block_m + c.block_n) * c.block_k * elem)
      fail(fmt::format("the epilogue's {} bytes of slabs do not fit in {} stages", slabs, c.stages));
  } else if (c.math == CudaMath::TensorOp) {
    const int k = mma_k(s);
    if (c.warp_m % 16 || c.warp_n % 16)
      fail(fmt::format("warp tile {}x{} must be a multiple of 16x16 (m16n8 mma tiles, B fragments in pairs)", c.warp_m,
                       c.warp_n));
    if (c.block_k % k || c.block_k * elem < 32)
      fail(fmt::format("block_k ({}) must be a multiple of the mma K ({}) and span at least 32 bytes", c.block_k, k));
    if (c.stages < 2 || c.stages > 5) fail(fmt::format("stages ({}) must be in 2..5", c.stages));
  } else {
    if (c.warp_m % 32 || c.warp_n % 16)
      fail(fmt::format("SIMT warp tile {}x{} must be a multiple of 32x16 (8x4 lanes, 4-wide thread vectors)", c.warp_m,
                       c.warp_n));
    if (c.block_k < 4 || c.block_k > 32) fail(fmt::format("SIMT block_k ({}) must be in 4..32", c.block_k));
    if (c.stages != 2) fail(fmt::format("SIMT kernels double-buffer: stages must be 2, not {}", c.stages));
  }
  // Every thread copies whole 16-byte chunks of each stage's A and B tiles (wgmma: TMA copies them).
  const int chunk_elems = 16 / elem;
  for (const auto& [name, rows, k_major] : {std::tuple{"A", c.block_m, k_contiguous(s.a.layout, true)},
                                            std::tuple{"B", c.block_n, k_contiguous(s.b.layout, false)}}) {
    if (c.math == CudaMath::Wgmma) break;
    const int contiguous = k_major ? c.block_k : rows;
    if (contiguous % chunk_elems)
      fail(fmt::format("the {} tile's contiguous extent ({}) must be a multiple of 16 bytes", name, contiguous));
    const int chunks = rows * c.block_k / chunk_elems;
    if (chunks % c.threads())
      fail(
          fmt::format("the {} tile's {} 16-byte chunks must divide evenly over {} threads", name, chunks, c.threads()));
  }
  if (c.split_k < 1 || c.split_k > 64) fail(fmt::format("split_k ({}) must be in 1..64", c.split_k));
  if (c.stream_k < 0 || c.stream_k > 4) fail(fmt::format("stream_k ({}) must be in 0..4", c.stream_k));
  if (c.stream_k > 0 && c.split_k > 1) fail("stream_k and split_k exclude each other (stream-K splits K itself)");
  if (c.stream_k_waves < 0 || c.stream_k_waves > 2)
    fail(fmt::format("stream_k_waves ({}) must be in 0..2", c.stream_k_waves));
  if (c.stream_k_waves > 0 && c.stream_k == 0) fail("stream_k_waves needs stream_k (it shares stream-K's waves)");
  if (c.stream_k > 0 && c.math == CudaMath::Simt) fail("stream_k needs a tensor-core kernel (tensorop or wgmma)");
  if (c.tma_store) {
    if (c.math != CudaMath::Wgmma) fail("tma_store needs the wgmma kernel");
    if (s.d.layout.kind() != LayoutKind::RowMajor) fail("tma_store needs a row-major D");
    if (c.align_c * dtype_bytes(s.d.dtype) != 16)
      fail(fmt::format("tma_store needs D's rows 16-byte aligned (align_c {} of {}-byte elements)", c.align_c,
                       dtype_bytes(s.d.dtype)));
    // Stream-K over clusters holds its schedule, the cluster's and the TMA boxes' state at once: past the 168
    // registers a thread of 384 gets (ptxas, 128 x 128 with a fused epilogue: 36 bytes of spills; through the
    // shared-memory slabs 146 registers, none).
    if (c.stream_k > 0 && c.cluster_m * c.cluster_n > 1)
      fail("tma_store with stream_k over clusters spills registers: D goes through the shared-memory slabs there");
  }
  if (c.cluster_m < 1 || c.cluster_m > 2 || c.cluster_n < 1 || c.cluster_n > 2)
    fail(fmt::format("cluster_m and cluster_n ({} and {}) must be 1 or 2", c.cluster_m, c.cluster_n));
  if (c.cluster_m * c.cluster_n > 1) {
    if (c.math != CudaMath::Wgmma) fail("clusters need the wgmma kernel (its TMA loads multicast)");
    // A tile shared over a cluster's extent is loaded in that many equal parts: K-major, rows of 8-row atoms;
    // M/N-major, whole 64-wide slices.
    if (!multicast_parts_fit(s, c))
      fail(fmt::format(
          "a {}x{} tile cannot be multicast over a {}x{} cluster: each part of a shared tile must be whole 8-row "
          "atoms (K-major) or whole 64-wide slices (M/N-major)",
          c.block_m, c.block_n, c.cluster_m, c.cluster_n));
  }
  if (!is_pow2(c.swizzle) || c.swizzle > 16) fail(fmt::format("swizzle ({}) must be 1, 2, 4, 8 or 16", c.swizzle));
  for (const auto& [name, align, bytes] :
       {std::tuple{"align_a", c.align_a, elem}, std::tuple{"align_b", c.align_b, elem},
        std::tuple{"align_c", c.align_c, dtype_bytes(s.d.dtype)}})
    if (!is_pow2(align) || align * bytes > 16)
      fail(fmt::format("{} ({}) must be a power of two of at most 16 bytes", name, align));

  // Resources.
  const std::int64_t smem = c.shared_bytes(s);
  if (smem > target.max_shared_per_block)
    fail(fmt::format("shared memory of {} bytes ({} stages of {}x{} and {}x{} tiles) exceeds {}'s {} bytes per block",
                     smem, c.stages, c.block_m, c.block_k, c.block_n, c.block_k, target.arch(),
                     target.max_shared_per_block));
  const int regs = c.register_estimate();
  if (regs > target.max_registers_per_thread)
    fail(fmt::format("warp tile {}x{} needs about {} registers per thread, more than {}", c.warp_m, c.warp_n, regs,
                     target.max_registers_per_thread));
  if (std::int64_t{regs} * c.threads() > target.registers_per_sm)
    fail(fmt::format("{} threads × ~{} registers exceed the {} registers of an SM", c.threads(), regs,
                     target.registers_per_sm));
}

}  // namespace tessera
