#include "generator/gemm/cpu_gemm_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "generator/core/arith.hpp"
#include "generator/core/config_overrides.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace tessera {

namespace {
constexpr std::int64_t kMaxWorkspaceBytes = 256 << 20;
constexpr std::int64_t kMaxVectorLanes = 16;  // f32 lanes of the widest ISA (AVX-512)

// The largest multiple at most `value`, and at least one multiple.
int round_down_positive(std::int64_t value, int multiple) {
  return static_cast<int>(std::max<std::int64_t>(multiple, value / multiple * multiple));
}
}  // namespace

bool dot_kernel_fits(const GemmProblem& problem) {
  const GemmSignature& s = problem.signature;
  // int8 and bf16 up to 128 rows: packing a column-major B into groups costs more against their 4x and 2x rates (int8
  // M = 128, 1 thread: dot 388 vs packed 318 GOP/s).
  const bool grouped = is_int8(s) || (s.a.dtype == DType::bf16 && s.b.dtype == DType::bf16);
  return (s.a.dtype == DType::f32 || grouped) && s.a.layout.kind() == LayoutKind::RowMajor &&
         s.b.layout.kind() == LayoutKind::ColMajor && problem.m >= 1 && problem.m <= (grouped ? 128 : 64);
}

bool transpose_pays(const GemmProblem& problem) {
  const GemmSignature& s = problem.signature;
  if (s.a.dtype != DType::f32 || s.b.layout.kind() != LayoutKind::ColMajor) return false;
  // x·Wᵀ: W read once in place and x packed beats packing all of W (rc ×4096², Zen 4: M = 16 81 vs 58 GFLOP/s); the dot
  // kernel below 12 rows.
  if (s.a.layout.kind() == LayoutKind::RowMajor) return problem.m >= 12 && problem.m < problem.n;
  // Both column-major: the transposed product is row-major × row-major (1024³ 99 vs 80-94), except against few columns.
  return s.a.layout.kind() == LayoutKind::ColMajor && (problem.m <= problem.n || problem.n >= 256);
}

namespace {
// A register tile and K slab for AVX-512 cores with two full-width FMA units (f32, B row-major, not small).
struct TwoUnitTile {
  int mr, nr;
  int kc;  // 0: derived from L1 as for other cores
  bool pack_b;
  bool streamed = false;  // B streamed from memory in short slabs as wide as N (default_for's skinny path)
};

// The least-padding tile of 16-24 accumulators for a few rows.
TwoUnitTile few_row_tile(std::int64_t m, int lanes, bool streamed) {
  const int kc = streamed ? 0 : 384;
  TwoUnitTile best{8, 3 * lanes, kc, false, streamed};
  std::int64_t best_rows = std::numeric_limits<std::int64_t>::max();
  for (auto [mr, vectors] : {std::pair{8, 3}, {12, 2}, {6, 4}, {4, streamed ? 6 : 4}}) {
    if (mr == 4 && m > 4) continue;
    const std::int64_t rows = (m + mr - 1) / mr * mr;
    if (rows < best_rows) best_rows = rows, best = {mr, vectors * lanes, kc, false, streamed};
  }
  return best;
}

// B packed on two full-width FMA units: 6x64 (10 loads per 24 FMAs) in balanced K slabs of up to 512; it keeps its
// speed when a neighbour shares the load ports (1024³ 121 vs 8x32's 106 GFLOP/s), 2% behind on an idle core.
TwoUnitTile packed_two_unit_tile(std::int64_t k, int lanes) {
  const std::int64_t slabs = std::max<std::int64_t>(1, (k + 511) / 512);
  const int kc = static_cast<int>(std::clamp<std::int64_t>(((k + slabs - 1) / slabs + 15) / 16 * 16, 64, 512));
  return {6, 4 * lanes, kc, true};
}

// Fitted to the Xeon's exhaustive records (bench/records/cpu_avx512_fma2.sqlite): top-1 regret 11.0% -> 3.5%.
TwoUnitTile two_unit_tile(const GemmProblem& problem, const CpuTarget& target) {
  const int lanes = target.vector_lanes();
  const std::int64_t m = problem.m, b_bytes = 4 * problem.k * problem.n;
  const std::int64_t vectors = (problem.n + lanes - 1) / lanes;
  // Up to 32 rows against a B beyond L2, B streams as a model's weights do: short slabs as wide as N, the tile padding
  // M least (×4096², M = 8: 90 vs 54 GFLOP/s).
  if (m <= 32 && b_bytes > target.l2_bytes)
    return m <= 2 ? TwoUnitTile{1, 4 * lanes, 0, false, true} : few_row_tile(m, lanes, true);
  // Few columns under many rows: the narrowest tile over a packed B (N <= 64: within 2-4% of the best).
  if (vectors <= 4 && m > 32) {
    constexpr int kRows[] = {0, 12, 8, 8, 6};  // 12-24 accumulators
    return {kRows[vectors], static_cast<int>(vectors) * lanes, 256, true};
  }
  // B in L2, read in place: 1-2 rows against 4 vectors, else 24 accumulators over a deep slab (LLM projections: within
  // 2%).
  if (m <= 2) return {static_cast<int>(m), 4 * lanes, 128, false};
  if (m <= 32) return few_row_tile(m, lanes, false);
  // 33-64 rows against a B beyond L2: short slabs of B in place (48×2048²: 8x48 at KC 64 the best).
  if (m <= 64 && b_bytes > target.l2_bytes) return {8, 3 * lanes, 64, false};
  // Hundreds of rows over a B from a quarter of L2 to L2: packed (512³: 166 vs 156 GFLOP/s in place).
  if (m >= 256 && b_bytes > target.l2_bytes / 4 && b_bytes <= target.l2_bytes) return {8, 2 * lanes, 384, true};
  // B within L2: 8x48 in place at KC 384 (3.2% behind the best on average over 88 problems).
  if (b_bytes <= target.l2_bytes) return {8, 3 * lanes, 384, false};
  return packed_two_unit_tile(problem.k, lanes);
}
}  // namespace

namespace {
// Both column-major on two-unit AVX-512 with M >= N >= 1024: packing both directly beats the transposed product, whose
// column-major D is stored in pieces (1024³ 156-158 vs 139-144 GFLOP/s).
bool direct_beats_transposed(const GemmProblem& p, const CpuTarget& t) {
  const GemmSignature& s = p.signature;
  return t.isa == CpuIsa::Avx512 && t.vector_fmas_per_cycle >= 2 && s.a.layout.kind() == LayoutKind::ColMajor &&
         s.b.layout.kind() == LayoutKind::ColMajor && p.m >= p.n && p.n >= 1024;
}
}  // namespace

CpuGemmConfig amx_config(const GemmProblem& problem, const CpuTarget& target, int mr, int nr, int kc) {
  CpuGemmConfig c;
  c.amx = CpuGemmConfig::kAmxTiles;
  c.mr = mr, c.nr = nr, c.kc = kc, c.k_unroll = 1;
  c.pack_a = false, c.pack_b = true;
  // B's KC×NC panel in half of L2 (bytes: kc K steps of int8 or bf16 per column); rows in blocks of 256.
  const int element_bytes = is_int8(problem.signature) ? 1 : 2;
  c.nc = std::clamp(static_cast<int>(target.l2_bytes / 2 / (std::int64_t{kc} * element_bytes)) / nr * nr, nr, 64 * nr);
  // Rows are packed a sliver at a time, so MC only bounds how often B is packed again: 1024 rows (AMX Xeon, bf16,
  // against 256: one thread 512³ 909 -> 980 GFLOP/s, 2048³ 743 -> 867; two threads 2048³ 1508 -> 1772, 1024³
  // 1612 -> 1552).
  c.mc = std::max(mr, 1024 / mr * mr);
  return c;
}

bool amx_pays(const GemmProblem& problem, const CpuTarget& target) {
  const bool low_precision = is_int8(problem.signature) ||
                             (problem.signature.a.dtype == DType::bf16 && problem.signature.b.dtype == DType::bf16);
  // Fewer than 16 rows would leave most of every tile empty: the vector kernels stream B as fast (they take only u8 A
  // × i8 B of the bytes).
  return target.amx && low_precision &&
         (problem.m >= 16 || (is_int8(problem.signature) && !is_vnni_int8(problem.signature)));
}

CpuGemmConfig CpuGemmConfig::default_for(const GemmProblem& asked, const CpuTarget& target) {
  const GemmProblem problem = with_nonempty_output(asked);
  // The largest tile (4 accumulator tiles of 16×16), 512 bytes of K a slab: the A and B slivers (16 KiB each) stay
  // in L1 (AMX Xeon, one thread, GFLOP/s or GOP/s against 256 and 1024 bytes: bf16 1024³ 885, 1193, 906; 2048³
  // 841, 1174, 959; int8 1024³ 1527, 2003, 1907; 2048³ 1535, 2071, 1754).
  const int amx_kc = is_int8(problem.signature) ? 512 : 256;
  if (amx_pays(problem, target)) {
    // bf16 x·Wᵀ with fewer rows than columns: the transposed product reads W's rows in place as its A tiles and packs
    // x, where packing W's columns into pairs would bound it (AMX Xeon, 1 thread, GFLOP/s: 32×4096² 188 -> 355,
    // 32×11008×4096 99 -> 296, 512×11008×4096 492 -> 647; 1024³ 660 direct, 514 transposed).
    if (problem.signature.b.layout.kind() == LayoutKind::ColMajor && problem.m < problem.n) {
      // Its A (W) streams from memory through slivers each used by few columns (x's rows): 1 KiB slabs, half as many
      // tile products' ends (32×4096² bf16 281 -> 362 GFLOP/s against 512 bytes, int8 586 -> 713 GOP/s).
      CpuGemmConfig t = amx_config(transposed(problem), target, 32, 32, 2 * amx_kc);
      t.transpose = true;
      return t;
    }
    return amx_config(problem, target, 32, 32, amx_kc);
  }
  if (transpose_pays(problem) && !direct_beats_transposed(problem, target)) {
    CpuGemmConfig t = default_for(transposed(problem), target);
    t.transpose = true;
    return t;
  }
  CpuGemmConfig c;
  const int lanes = target.vector_lanes();
  const bool avx512 = target.isa == CpuIsa::Avx512;
  c.mr = avx512 ? 8 : 6;
  c.nr = 2 * lanes;
  // In-place A beats packed A on a Zen 5 (1024³: 246-267 vs 201-233 GFLOP/s); packed B wins from M ≈ 16 up.
  c.pack_a = false;
  c.pack_b = true;
  const bool b_rows_contiguous = problem.signature.b.layout.kind() == LayoutKind::RowMajor;
  const bool small = problem.m >= 1 && problem.n >= 1 && problem.m <= 64 && problem.n <= 64 && problem.k <= 64;
  bool skinny = false;            // few rows of A against a B streamed in place
  bool short_wide_slabs = false;  // few rows of A against a packed B: KC 128, NC up to N
  int slab_kc = 0;                // a measured K slab in place of the one derived from L1
  // A dot tile sums across lanes once per tile, which a short K does not repay (8×4096×64: 32 vs 46-56 GFLOP/s).
  if (dot_kernel_fits(problem) && problem.k >= (problem.m < 12 ? 128 : 1024)) {
    // x·Wᵀ with few rows: dot products along K beat packing B's columns up to M = 64 (M = 32: 121 vs 47 GFLOP/s).
    c.dot = true;
    c.pack_a = c.pack_b = false;
    // 24-accumulator tiles from 12 rows (from 4 on two full-width FMA units: M = 8 63 vs 42 GFLOP/s).
    const bool wide = avx512 && (problem.m >= 12 || (target.vector_fmas_per_cycle >= 2 && problem.m >= 4));
    c.mr = wide ? 4 : problem.m >= 2 ? 2 : 1;
    c.nr = wide ? 6 : problem.m >= 2 && !avx512 ? 5 : 8;  // AVX2 has 16 registers
    c.k_unroll = 2;
    // Up to M = 8 B streams once whatever KC; a deeper slab saves the partial sums (1×4096²: 14.2 vs 9.8 GFLOP/s).
    c.kc = problem.m <= 8 ? 4096 : 1024;
    if (k_group(problem.signature) > 1 && avx512) {
      // int8 (K in bytes) and bf16: 4×6 tiles from 4 rows, and K in one slab, no partial sums (int8, Zen 4, 1 thread,
      // ×4096², GOP/s: M = 8 276 vs 191 with 2×8 over 4096, M = 32 377 vs 290 with 4×6 over 1024; M = 1 and 2 keep
      // 1×8 and 2×8).
      c.mr = problem.m >= 4 ? 4 : problem.m >= 2 ? 2 : 1;
      c.nr = problem.m >= 4 ? 6 : 8;
      c.kc = 4096;
      // Two full-width units take more K vectors in flight per tile (Zen 5, 1 thread, ×4096², B N×K, unroll 4 vs 2:
      // bf16 M = 32 309 vs 257, M = 64 327 vs 277, M = 128 343 vs 299 GFLOP/s; int8 M = 32 626 vs 600 GOP/s).
      if (target.vector_fmas_per_cycle >= 2) c.k_unroll = 4;
    }
    c.mc = static_cast<int>((problem.m + c.mr - 1) / c.mr * c.mr);
    c.nc = 240;  // a multiple of 6 and 8; 17 column tiles for N = 4096 to share among threads
    return c;
  }
  if (k_group(problem.signature) > 1) {
    // vdpbf16ps and vpdpbusd consume K in groups from a packed B panel; the register tile is the f32 one.
  } else if (!b_rows_contiguous && !small) {
    // Packing is what turns a column-major or strided B into NR-wide rows: keep the general shape.
    if (avx512 && target.vector_fmas_per_cycle >= 2 && problem.m > 32) {
      const TwoUnitTile t = packed_two_unit_tile(problem.k, lanes);
      c.mr = t.mr, c.nr = t.nr;
      slab_kc = t.kc;
    }
  } else if (small) {
    // Small: sizes compiled in, A and B in place (16³×1024: 183 vs 112 GFLOP/s); a B without contiguous rows packed
    // whole.
    c.pack_b = !b_rows_contiguous;
    if (problem.n <= lanes) {
      c.nr = lanes;
      c.mr = avx512 ? 16 : 8;
    } else if (avx512 && problem.signature.d.layout.kind() == LayoutKind::ColMajor) {
      // D stored by columns: 4-row tiles transpose into 4-float columns cheaply (Aᵀ·Bᵀ 64³: 101 vs 90 GFLOP/s).
      c.mr = 4;
      c.nr = 4 * lanes;
    }
    c.fixed_m = static_cast<int>(problem.m);
    c.fixed_n = static_cast<int>(problem.n);
    c.fixed_k = static_cast<int>(problem.k);
  } else if (avx512 && target.vector_fmas_per_cycle >= 2) {
    const TwoUnitTile t = two_unit_tile(problem, target);
    c.mr = t.mr, c.nr = t.nr, c.pack_b = t.pack_b;
    skinny = t.streamed;
    slab_kc = t.kc;
  } else if (problem.k * problem.n * 4 <= target.l2_bytes / 4 && problem.m > 8) {
    // B that stays in L2 read in place: packing it is overhead (256³: 277 vs 268 GFLOP/s); from 384² packing wins.
    c.pack_b = false;
  } else if (problem.m <= 2) {
    // GEMV-like: one row of A against wide rows of B streamed once, four vectors per row of the slab (1×4096²: 11.3
    // vs 5.7).
    c.mr = 1;
    c.nr = (avx512 ? 4 : 7) * lanes;
    c.pack_b = false;
    skinny = true;
  } else if (problem.m <= 8 && avx512) {
    c.mr = 2;  // 8×4096×4096: 52.4 vs 45.1
    c.nr = 10 * lanes;
    c.pack_b = false;
    skinny = true;
  } else if (problem.m <= 8) {
    // AVX2: 12 accumulators in whichever of 4×24 and 6×16 pads M least, B streamed in N-wide slabs (M = 8: 38.3
    // vs 29.5).
    const bool six = (problem.m + 5) / 6 * 6 < (problem.m + 3) / 4 * 4;
    c.mr = six ? 6 : 4;
    c.nr = (six ? 2 : 3) * lanes;
    c.pack_b = false;
    skinny = true;
  } else if (problem.m <= 32 && avx512) {
    // AVX-512: streaming B beats packing it up to M = 32 (32×4096²: 107-114 vs 62-92 GFLOP/s).
    c.mr = 4;
    c.nr = 6 * lanes;
    c.pack_b = false;
    skinny = true;
  } else if (problem.m <= 32) {
    // AVX2: B packed in short slabs as wide as N beats B in place up to M = 32 (M = 32: 51-57 vs 32-38 GFLOP/s).
    c.mr = 4;
    c.nr = 3 * lanes;
    short_wide_slabs = true;
  }
  if ((!avx512 || target.vector_fmas_per_cycle >= 2) && !c.fixed() &&
      problem.signature.a.layout.kind() == LayoutKind::ColMajor) {
    // A column-major A is packed on AVX2 and two-unit AVX-512: in place, each K step of a sliver costs a cache line
    // (Aᵀ·B 1024³: Zen 3 50 vs 89, Xeon 118-124 vs 147-152 GFLOP/s); a Zen 4 keeps it in place.
    c.pack_a = true;
    if (avx512 && c.pack_b && !skinny && !short_wide_slabs) {
      // With B packed: 8×32 (or 8×48 where three vectors pad N less) over 256-deep slabs, so B's panel is 1024 columns
      // wide and A packed half as often (Aᵀ·B 1024³: 155 vs 140 GFLOP/s); a B in place keeps the tile's slabs.
      const auto padded = [&](std::int64_t nr) { return (problem.n + nr - 1) / nr * nr; };
      c.mr = 8;
      c.nr = padded(3 * lanes) < padded(2 * lanes) ? 3 * lanes : 2 * lanes;
      slab_kc = 256;
    }
  }
  if (!skinny && !c.fixed() && problem.signature.a.dtype == DType::f32) {
    // Few columns (the transposed x·Wᵀ): the narrowest tile covering N, since packed panels are zero-padded to NR.
    const int vectors = static_cast<int>((problem.n + lanes - 1) / lanes);
    if (c.pack_b ? vectors < c.nr / lanes || (avx512 && vectors == 3) : vectors == 1) c.nr = vectors * lanes;
  }
  // A KC×NR sliver of B shares L1 with A's MR×KC sliver; the KC×NC panel of B lives in half of L2.
  c.kc = std::clamp(round_down_positive(target.l1d_bytes / (4 * (std::min(c.nr, 2 * lanes) + c.mr)), 32), 64, 512);
  if (slab_kc > 0) c.kc = slab_kc;
  c.nc = std::clamp(round_down_positive(target.l2_bytes / 2 / (4 * c.kc), c.nr), c.nr, 32 * c.nr);
  // One or two rows: panels as wide as N (up to 64 tiles), as the variant space gives them.
  if (slab_kc > 0 && c.mr <= 2)
    c.nc = static_cast<int>(std::clamp<std::int64_t>((problem.n + c.nr - 1) / c.nr * c.nr, c.nr, 64 * c.nr));
  // AVX2: panels of 1024 columns from L2 and L3 cost fewer packing phases and hand-overs (2048³, 2 threads: 155 vs
  // 147).
  if (!avx512) c.nc = std::max(c.nc, round_down_positive(1024, c.nr));
  // MC bounds how many rows reuse one packed B panel, until the MC×NC partial sums outgrow the caches.
  c.mc = std::max(c.mr, 1024 / c.mr * c.mr);
  c.k_unroll = 4;
  if (skinny) {
    // Skinny: short K slabs over tiles as wide as N, so B streams from memory in order and the partial sums stay in L1.
    c.kc = problem.m <= 2 ? 8 : 16;
    // Up to 2 rows (and for two-unit AVX-512 tiles) panels as wide as N, so two threads split the columns evenly.
    const bool two_units = avx512 && target.vector_fmas_per_cycle >= 2;
    const int widest = problem.m <= 2 || two_units ? 16384 / c.nr : avx512 ? 64 : 4096 / c.nr + 1;
    c.nc = static_cast<int>(std::clamp<std::int64_t>((problem.n + c.nr - 1) / c.nr * c.nr, c.nr, widest * c.nr));
    c.mc = 32 / c.mr * c.mr;
  }
  if (short_wide_slabs) {
    // (M = 32: NC 2016 and KC 128 measured best.)
    c.kc = 128;
    c.nc = static_cast<int>(std::clamp<std::int64_t>((problem.n + c.nr - 1) / c.nr * c.nr, c.nr, 167 * c.nr));
    c.mc = static_cast<int>((problem.m + c.mr - 1) / c.mr * c.mr);
  }
  c.kc *= k_group(problem.signature);  // groups along K: the same bytes of B per slab
  if (is_int8(problem.signature) && avx512 && problem.m <= 256) {
    // Up to 256 rows (decode and prefill batches against a layer's weights): 4×64 tiles over 128 groups of K, the
    // variant space's best on Zen 4 (1 thread, GOP/s, against 8×32 over 192 groups: 8×4096² 146 vs 117, 32×4096² 282
    // vs 259, 128×4096² 378 vs 340, 32×11008×4096 268 vs 220, 1×4096² 21 vs 15, 256×4096² 379 vs 371).
    c.mr = 4, c.nr = 4 * lanes, c.kc = 512, c.nc = 256, c.mc = 1024;
  }
  if (c.fixed()) {
    c.kc = std::max(c.fixed_k, 1);
    c.mc = (c.fixed_m + c.mr - 1) / c.mr * c.mr;
    c.nc = (c.fixed_n + c.nr - 1) / c.nr * c.nr;
  }
  return c;
}

CpuGemmConfig CpuGemmConfig::overridden(const CpuGemmConfig& chosen, const GemmProblem& problem,
                                        const CpuTarget& target, const std::string& text) {
  const auto overrides = parse_config_overrides(text);
  const bool vector = std::any_of(overrides.begin(), overrides.end(),
                                  [](const auto& kv) { return kv.first == "amx" && kv.second == kAmxNone; });
  if (!vector || chosen.amx == kAmxNone) return chosen.with_overrides(text);
  CpuTarget without = target;
  without.amx = false;
  return default_for(problem, without).with_overrides(text);
}

CpuGemmConfig CpuGemmConfig::with_overrides(const std::string& text) const {
  CpuGemmConfig c = *this;
  for (const auto& [key, value] : parse_config_overrides(text)) {
    if (key == "mr")
      c.mr = value;
    else if (key == "nr")
      c.nr = value;
    else if (key == "kc")
      c.kc = value;
    else if (key == "mc")
      c.mc = value;
    else if (key == "nc")
      c.nc = value;
    else if (key == "k_unroll")
      c.k_unroll = value;
    else if (key == "pack_a")
      c.pack_a = value != 0;
    else if (key == "pack_b")
      c.pack_b = value != 0;
    else if (key == "fixed_m")
      c.fixed_m = value;
    else if (key == "fixed_n")
      c.fixed_n = value;
    else if (key == "fixed_k")
      c.fixed_k = value;
    else if (key == "dot")
      c.dot = value != 0;
    else if (key == "transpose")
      c.transpose = value != 0;
    else if (key == "amx")
      c.amx = value;
    else
      throw InvalidArgument("config", "unknown key '" + key +
                                          "' (mr, nr, kc, mc, nc, k_unroll, pack_a, pack_b, fixed_m, fixed_n, fixed_k, "
                                          "dot, transpose, amx)");
  }
  return c;
}

nlohmann::json to_json(const CpuGemmConfig& config) {
  nlohmann::json j = {{"mr", config.mr},           {"nr", config.nr},          {"kc", config.kc},
                      {"mc", config.mc},           {"nc", config.nc},          {"k_unroll", config.k_unroll},
                      {"pack_a", config.pack_a},   {"pack_b", config.pack_b},  {"fixed_m", config.fixed_m},
                      {"fixed_n", config.fixed_n}, {"fixed_k", config.fixed_k}};
  // Only when set: the configs (and so the spec hashes of tuning records and cached kernels) from before dot
  // kernels existed stay what they were.
  if (config.dot) j["dot"] = true;
  if (config.transpose) j["transpose"] = true;
  if (config.amx != CpuGemmConfig::kAmxNone) j["amx"] = config.amx;
  return j;
}

template <>
CpuGemmConfig from_json<CpuGemmConfig>(const nlohmann::json& j) {
  CpuGemmConfig c;
  c.mr = integer_at<int>(j, "mr");
  c.nr = integer_at<int>(j, "nr");
  c.kc = integer_at<int>(j, "kc");
  c.mc = integer_at<int>(j, "mc");
  c.nc = integer_at<int>(j, "nc");
  c.k_unroll = integer_at<int>(j, "k_unroll");
  c.pack_a = j.at("pack_a").get<bool>();
  c.pack_b = j.at("pack_b").get<bool>();
  c.fixed_m = integer_at<int>(j, "fixed_m");
  c.fixed_n = integer_at<int>(j, "fixed_n");
  c.fixed_k = integer_at<int>(j, "fixed_k");
  c.dot = j.value("dot", false);
  c.transpose = j.value("transpose", false);
  c.amx = j.contains("amx") ? integer_at<int>(j, "amx") : CpuGemmConfig::kAmxNone;
  return c;
}

std::int64_t CpuGemmConfig::workspace_bytes() const {
  // A dot kernel's partial sums are whole vectors per output (summed across lanes at the end).
  const std::int64_t partial_sums = std::int64_t{mc} * partial_sum_columns() * (dot ? kMaxVectorLanes : 1);
  const std::int64_t floats = packed_a_floats() + (pack_b ? std::int64_t{kc} * nc : 0) + partial_sums;
  return floats * 4 + 3 * 64;  // each region starts on a cache line
}

int k_group(const GemmSignature& s) { return s.a.dtype == DType::bf16 ? 2 : is_int8(s) ? 4 : 1; }

void validate(const GemmSignature& s, const CpuGemmConfig& c, const CpuTarget& target) {
  const auto fail = [](const std::string& rule) { throw ConfigError(rule); };
  if (c.transpose) {
    // The rules are those of the product the kernel computes, in its names.
    try {
      validate(transposed(s), c.untransposed(), target);
    } catch (const ConfigError& e) {
      fail(std::string("transposed (Dᵀ = Bᵀ·Aᵀ): ") + e.what());
    }
    return;
  }
  const bool bf16 = s.a.dtype == DType::bf16 && s.b.dtype == DType::bf16;
  const bool int8 = is_int8(s);
  if (s.c.dtype != DType::f32)
    fail(fmt::format("C dtype {} is not supported on {} (f32 only)", dtype_name(s.c.dtype), target.str()));
  // D: the epilogue's f32 value, or rounded to bf16, or requantised to u8 / i8 (rounded to nearest, saturated).
  if (s.d.dtype != DType::f32 && s.d.dtype != DType::bf16 && s.d.dtype != DType::u8 && s.d.dtype != DType::i8)
    fail(fmt::format("D dtype {} is not supported on {} (f32, bf16, u8 or i8)", dtype_name(s.d.dtype), target.str()));
  if (s.accumulator != (int8 ? DType::i32 : DType::f32))
    fail(fmt::format("accumulator dtype {} is not supported on {} ({} for these inputs)", dtype_name(s.accumulator),
                     target.str(), int8 ? "i32" : "f32"));
  if (!bf16 && !int8)
    for (const auto& [name, dtype] : {std::pair{"A", s.a.dtype}, std::pair{"B", s.b.dtype}})
      if (dtype != DType::f32)
        fail(fmt::format("{} dtype {} is not supported on {} (A and B both f32, both bf16, or u8 A and i8 B)", name,
                         dtype_name(dtype), target.str()));
  if (bf16 && !target.avx512_bf16) fail(fmt::format("bf16 GEMM needs avx512_bf16, which {} lacks", target.str()));
  if (int8 && !is_vnni_int8(s) && c.amx == CpuGemmConfig::kAmxNone)
    fail(
        fmt::format("int8 GEMM of {} A and {} B needs AMX tiles (tdpbssd, tdpbsud, tdpbuud; amx=1 on cpu:amx): the "
                    "vector kernels' vpdpbusd multiplies u8 A by i8 B",
                    dtype_name(s.a.dtype), dtype_name(s.b.dtype)));
  if (int8 && !target.vnni)
    fail(fmt::format("int8 GEMM needs {}, which {} lacks", target.isa == CpuIsa::Avx512 ? "avx512_vnni" : "avx_vnni",
                     target.str()));
  if (const int group = k_group(s); group > 1 && !c.dot) {
    const std::string_view what = int8 ? "int8" : "bf16";
    // Groups along K are read as 32-bit words: from A's rows, and from B's rows (interleaved) or, for int8, its
    // columns.
    if (s.a.layout.kind() != LayoutKind::RowMajor)
      fail(fmt::format("{} GEMM supports a row-major A (groups of {} along K are read as 32-bit words)", what, group));
    if (s.b.layout.kind() != LayoutKind::RowMajor && s.b.layout.kind() != LayoutKind::ColMajor)
      fail(fmt::format("{} GEMM supports a row- or column-major B (groups of {} along K are read as 32-bit words)",
                       what, group));
    if (c.pack_a || !c.pack_b)
      fail(fmt::format("{} GEMM reads A in place and packs B into groups of {} along K (pack_a=0, pack_b=1)", what,
                       group));
    if (c.kc % group != 0)
      fail(fmt::format("KC ({}) must be a multiple of {} for {} (K is consumed in groups of {})", c.kc, group, what,
                       group));
  }
  for (const auto& in : s.inputs)
    if (in.operand.dtype != DType::f32)
      fail(fmt::format("epilogue tensor '{}' dtype {} is not supported on {} (f32 only)", in.name,
                       dtype_name(in.operand.dtype), target.str()));
  if (!s.a.layout.reads_memory() || !s.b.layout.reads_memory()) fail("A and B cannot have the zero layout");
  if (s.d.layout.kind() != LayoutKind::RowMajor && s.d.layout.kind() != LayoutKind::ColMajor)
    fail(fmt::format("D layout must be row or col, not {}", s.d.layout.name()));

  const int lanes = target.vector_lanes();
  if (c.mr < 1 || c.mr > 32) fail(fmt::format("MR ({}) must be in 1..32", c.mr));
  if (c.amx != CpuGemmConfig::kAmxNone) {
    if (c.amx != CpuGemmConfig::kAmxTiles && c.amx != CpuGemmConfig::kAmxEmulated)
      fail(fmt::format("amx ({}) must be 0 (vector registers), 1 (AMX tiles) or 2 (AMX emulated)", c.amx));
    if (!bf16 && !int8) fail("AMX tiles multiply bf16 or int8 (u8 A × i8 B), not f32");
    if (target.isa != CpuIsa::Avx512) fail(fmt::format("AMX kernels are AVX-512 kernels, not {}", target.str()));
    if (c.amx == CpuGemmConfig::kAmxTiles && !target.amx)
      fail(fmt::format("AMX tiles need amx_tile, amx_bf16 and amx_int8, which {} lacks ({})", target.str(),
                       CpuTarget::host_amx_missing()));
    if (c.dot || c.fixed()) fail("AMX kernels are packed-B kernels of runtime sizes (no dot, no fixed sizes)");
    const int a_tiles = c.mr / 16, b_tiles = c.nr / 16;
    if (c.mr % 16 != 0 || c.nr % 16 != 0)
      fail(
          fmt::format("AMX tile {}x{}: MR and NR must be multiples of 16 (tiles of 16 rows and 16 columns): 16x16, "
                      "16x32, 16x48, 32x16 or 32x32",
                      c.mr, c.nr));
    if (a_tiles * b_tiles + a_tiles + b_tiles > 8)
      fail(
          fmt::format("AMX tile {}x{} needs {} tile registers ({} accumulators + {} A + {} B), AMX has 8: 16x16, "
                      "16x32, 16x48, 32x16 or 32x32",
                      c.mr, c.nr, a_tiles * b_tiles + a_tiles + b_tiles, a_tiles * b_tiles, a_tiles, b_tiles));
    const int block = int8 ? 64 : 32;
    if (c.kc % block != 0)
      fail(fmt::format("KC ({}) of an AMX kernel must be a multiple of {} (64 bytes of K per tile)", c.kc, block));
  }
  if (c.dot) {
    if (c.nr < 1 || c.nr > lanes)
      fail(fmt::format("NR ({}) of a dot kernel must be in 1..{} (one lane of the result per column)", c.nr, lanes));
    const int registers = c.mr * c.nr + c.mr + 1;
    if (registers > target.vector_registers())
      fail(fmt::format("dot tile {}x{} needs {} vector registers ({} accumulators + {} A + 1 B), {} has {}", c.mr, c.nr,
                       registers, c.mr * c.nr, c.mr, target.str(), target.vector_registers()));
    if (s.a.dtype != DType::f32 && !int8 && !bf16) fail("dot kernels are f32, bf16 or int8");
    if (s.a.layout.kind() != LayoutKind::RowMajor || s.b.layout.kind() != LayoutKind::ColMajor)
      fail(fmt::format("a dot kernel reads A and B along K: row-major A and column-major B, not {} and {}",
                       s.a.layout.name(), s.b.layout.name()));
    if (c.pack_a || c.pack_b || c.fixed()) fail("a dot kernel packs nothing and has runtime sizes");
  } else {
    if (c.nr < lanes || c.nr % lanes != 0)
      fail(
          fmt::format("NR ({}) must be a positive multiple of the vector width ({}) on {}", c.nr, lanes, target.str()));
    const int vectors = c.nr / lanes;
    const int registers = c.mr * vectors + vectors + 1;
    if (c.amx == CpuGemmConfig::kAmxNone && registers > target.vector_registers())
      fail(
          fmt::format("MR×NR register tile {}x{} needs {} vector registers ({} accumulators + {} B + 1 broadcast), "
                      "{} has {}",
                      c.mr, c.nr, registers, c.mr * vectors, vectors, target.str(), target.vector_registers()));
  }
  if (c.kc < 1 || c.kc > 4096) fail(fmt::format("KC ({}) must be in 1..4096", c.kc));
  if (c.k_unroll != 1 && c.k_unroll != 2 && c.k_unroll != 4 && c.k_unroll != 8)
    fail(fmt::format("K unroll ({}) must be 1, 2, 4 or 8", c.k_unroll));
  if (c.mc < c.mr || c.mc % c.mr != 0) fail(fmt::format("MC ({}) must be a positive multiple of MR ({})", c.mc, c.mr));
  if (c.nc < c.nr || c.nc % c.nr != 0) fail(fmt::format("NC ({}) must be a positive multiple of NR ({})", c.nc, c.nr));
  if (c.fixed_m || c.fixed_n || c.fixed_k) {
    if (c.fixed_m < 1 || c.fixed_n < 1 || c.fixed_k < 0 || c.fixed_m > 256 || c.fixed_n > 256 || c.fixed_k > 1024)
      fail(
          fmt::format("fixed sizes {}x{}x{} must be M, N in 1..256 and K in 0..1024", c.fixed_m, c.fixed_n, c.fixed_k));
    if (c.pack_a) fail("a fixed-size kernel reads A in place (pack_a=0)");
    if (c.kc < c.fixed_k) fail(fmt::format("a fixed-size kernel is one K slab: KC ({}) >= K ({})", c.kc, c.fixed_k));
    if (s.a.dtype != DType::f32) fail("fixed-size kernels are f32");
  }
  if (!c.pack_b && !c.dot && s.b.layout.kind() != LayoutKind::RowMajor)
    fail(fmt::format("unpacked B needs row-major B (NR contiguous columns per row), not {}", s.b.layout.name()));
  if (c.workspace_bytes() > kMaxWorkspaceBytes)
    fail(fmt::format("workspace of {} bytes for MC={}, NC={}, KC={} exceeds {} bytes", c.workspace_bytes(), c.mc, c.nc,
                     c.kc, kMaxWorkspaceBytes));
}

}  // namespace tessera
