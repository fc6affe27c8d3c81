#include "generator/gemm/cpu_gemm_config.hpp"
#include "generator/core/arith.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "generator/core/config_overrides.hpp"
#include "generator/core/error.hpp"

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
  return s.a.dtype == DType::f32 && s.a.layout.kind() == LayoutKind::RowMajor &&
         s.b.layout.kind() == LayoutKind::ColMajor && problem.m >= 1 && problem.m <= 64;
}

bool transpose_pays(const GemmProblem& problem) {
  const GemmSignature& s = problem.signature;
  if (s.a.dtype != DType::f32 || s.b.layout.kind() != LayoutKind::ColMajor) return false;
  // x·Wᵀ: W (B) read once in place and x (A) packed, where the plain product packs all of W transposed
  // (rc, ×4096×4096, 1 thread on Zen 4, GFLOP/s: M = 16 81 vs 58 (dot), 32 86 vs 74 (dot), 64 94 vs 74 (dot),
  // 128 102 vs 89 (packed)). Below 12 rows the dot kernel wins (M = 8: 46 vs 42).
  if (s.a.layout.kind() == LayoutKind::RowMajor) return problem.m >= 12 && problem.m < problem.n;
  // Both column-major: the transposed product is row-major × row-major (1024³ 99 vs 80-94; ×4096×4096: M = 2 10.3
  // vs 6.4, 8 38 vs 26, 64 98 vs 76; 777×333×555 90-98 vs 86-98, 1024×512×1024 98-101 vs 90), except against few
  // columns, where the product's few rows would share each packed panel (4096×64×4096: 69 vs 78-94).
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

// B packed, the general case, on AVX-512 cores with two full-width FMA units: 6x64, 24 accumulators fed by 10 loads
// per 24 FMAs, not 8x32's 10 per 16. On an idle core the two time alike (the Xeon records, M >= 256 and B beyond L2:
// 6x64 1-3% behind 8x32), but when another tenant of the host shares the core's load ports (this VM, for hours at a
// time, its FMA peak unchanged), 8x32 loses a third of its speed and 6x64 a fifth. 1 thread, medians of 6-25
// alternated runs, GFLOP/s, 8x32 at KC 512 / 6x64 at KC 384: 1024³ 106 / 121, 2048³ 105 / 120; 8x48 at KC 512
// 116 / 119, 12x32 102, 4x96 109 (1024³); B column-major 105 / 110, A column-major (packed) 97 / 112. On the idle
// VM 6x64 is about 2% behind (1024³ 158.5 vs 155.8, 2048³ 160.6 vs 158.0, 4096x1024x4096 159.5 vs 161.4). K in
// balanced slabs of up to 512, as for 8x32 before: idle, KC 512 / NC 512 against 352 / 704, 1024³ 155.8 vs 154.3,
// 2048³ 158.0 vs 156.1, 4096x1024x4096 161.4 vs 159.3; in the slow state 119.7 vs 120.6 (1024³, 25 runs).
TwoUnitTile packed_two_unit_tile(std::int64_t k, int lanes) {
  const std::int64_t slabs = std::max<std::int64_t>(1, (k + 511) / 512);
  const int kc = static_cast<int>(std::clamp<std::int64_t>(((k + slabs - 1) / slabs + 15) / 16 * 16, 64, 512));
  return {6, 4 * lanes, kc, true};
}

// Fitted to the exhaustive tuning records of such a core (an Intel Xeon, bench/records/cpu_avx512_fma2.sqlite,
// 1 thread: 420 problems, ~170 variants each). Its mean top-1 regret there went from 11.0% with the rules measured
// on AMD cores to 3.5% with these (per branch below: the regret of the rule's pick / of the AMD rules' pick).
TwoUnitTile two_unit_tile(const GemmProblem& problem, const CpuTarget& target) {
  const int lanes = target.vector_lanes();
  const std::int64_t m = problem.m, b_bytes = 4 * problem.k * problem.n;
  const std::int64_t vectors = (problem.n + lanes - 1) / lanes;
  // Up to 32 rows against a B larger than L2, B is taken as streamed from memory, as a model's weights are: short
  // slabs as wide as N, 4x96 up to 4 rows, above that the 8x48, 12x32 or 6x64 tile that pads M least (B-cold records,
  // M = 3-12: the best measured; the best at KC >= 64 is 10-42% slower. B warm in L3, ×4096×4096, 1 / 2 threads,
  // GFLOP/s, against the AMD rules' 2×160 or 4×96: M = 4 53 vs 41; M = 8 90 / 166 vs 54 / 115; M = 12 95 vs 57;
  // M = 16 96 / 192 vs 66 / 141; M = 32 99 / 204 vs 70 / 158). With a smaller B warm in L3 the deep slabs below
  // win by 15-40%, which the learned model or the tuner recovers.
  if (m <= 32 && b_bytes > target.l2_bytes)
    return m <= 2 ? TwoUnitTile{1, 4 * lanes, 0, false, true} : few_row_tile(m, lanes, true);
  // Few columns (up to 4 vectors) under many rows: the narrowest tile over a packed B, whose loads are then whole
  // vectors (M > 32, N <= 64: 2-4% vs 15-40% for 8x32 / 8x48 read in place).
  if (vectors <= 4 && m > 32) {
    constexpr int kRows[] = {0, 12, 8, 8, 6};  // 12-24 accumulators
    return {kRows[vectors], static_cast<int>(vectors) * lanes, 256, true};
  }
  // B in L2 (or L3 if it outgrows it), read in place: 1-2 rows against 4 vectors; otherwise 24 accumulators over a
  // deep slab (LLM projections at 3-32 tokens with K x N <= 512K floats: 8x48 / 12x32 / 6x64 at KC 384 within 2% of
  // the best on average, the AMD rules' 4x96 / 8x48 at KC 16 20-50% slower).
  if (m <= 2) return {static_cast<int>(m), 4 * lanes, 128, false};
  if (m <= 32) return few_row_tile(m, lanes, false);
  // 33-64 rows against a B larger than L2: short slabs of B in place (48 x 2048 x 2048: 8x48 at KC 64 the best,
  // 8x32 packed 25% slower).
  if (m <= 64 && b_bytes > target.l2_bytes) return {8, 3 * lanes, 64, false};
  // Hundreds of rows over a B from a quarter of L2 to L2: packed, whose panel the many rows repay (M >= 256, 33
  // problems: 8x32 at KC 384 1.4% behind the best on average, 8x48 in place 2.8%; 512³, 1 thread, two alternated
  // runs: 8x32 packed at KC 256 166 / 163 GFLOP/s, 8x48 in place at KC 384 156 / 156).
  if (m >= 256 && b_bytes > target.l2_bytes / 4 && b_bytes <= target.l2_bytes) return {8, 2 * lanes, 384, true};
  // B within L2: 8x48 in place at KC 384 (the other 88 problems of M > 64: 3.2% behind the best on average; 8x32 in
  // place at KC 288, the AMD rule up to a quarter of L2, 10.6% where it was measured).
  if (b_bytes <= target.l2_bytes) return {8, 3 * lanes, 384, false};
  return packed_two_unit_tile(problem.k, lanes);
}
}  // namespace

namespace {
// Both column-major on two-unit AVX-512, at least as many rows as columns and N ≥ 1024: packing both directly (A in
// 8×32 slivers, B transposed) beats the transposed product, whose column-major D takes 8-float pieces a leading
// dimension apart (Intel Xeon, interleaved in one process, GFLOP/s, direct vs transposed, 1 thread: 1024³ 156-158 vs
// 139-144, 2048³ 153-155 vs 146-148, even at 4096×1024×4096 and 4096³; 2 threads: 2048³ 300 vs 290, 4096³ 310 vs
// 301, 1024³ 292-294 vs 264-304). Behind where M < N (256×1024×1024 140 vs 158, 128×4096×4096 115 vs 144) and, on
// two threads, at N = 512 (512³ 298-300 vs 307-314, 1024×512×1024 276-281 vs 289-290).
bool direct_beats_transposed(const GemmProblem& p, const CpuTarget& t) {
  const GemmSignature& s = p.signature;
  return t.isa == CpuIsa::Avx512 && t.vector_fmas_per_cycle >= 2 && s.a.layout.kind() == LayoutKind::ColMajor &&
         s.b.layout.kind() == LayoutKind::ColMajor && p.m >= p.n && p.n >= 1024;
}
}  // namespace

CpuGemmConfig CpuGemmConfig::default_for(const GemmProblem& asked, const CpuTarget& target) {
  const GemmProblem problem = with_nonempty_output(asked);
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
  // Measured on a Zen 5 core, 1 thread (tessera gemm --config ...): in-place A beats packed A everywhere
  // (1024³: 246-267 vs 201-233 GFLOP/s); packed B wins from M ≈ 16 up, in-place B below that and for tiny problems.
  c.pack_a = false;
  c.pack_b = true;
  const bool b_rows_contiguous = problem.signature.b.layout.kind() == LayoutKind::RowMajor;
  const bool small = problem.m >= 1 && problem.n >= 1 && problem.m <= 64 && problem.n <= 64 && problem.k <= 64;
  bool skinny = false;            // few rows of A against a B streamed in place
  bool short_wide_slabs = false;  // few rows of A against a packed B: KC 128, NC up to N
  int slab_kc = 0;                // a measured K slab in place of the one derived from L1
  // A dot tile sums its accumulators across lanes once per tile, which a short K does not repay (1 thread, Zen 4,
  // dot vs packed GFLOP/s: 8×4096×64 32 vs 46-56, 8×4096×128 52-65 vs 46-57, 48×32×256 66 vs 96, 64×64×1024 99 vs
  // 92-95).
  if (dot_kernel_fits(problem) && problem.k >= (problem.m < 12 ? 128 : 1024)) {
    // x·Wᵀ with few rows: dot products along K beat packing B's columns into rows up to M = 64 (1 thread,
    // ×4096×4096, GFLOP/s: M = 16 88 vs 63, 32 121 vs 47, 64 146 vs 129; M = 128 126 vs 136). From 12 rows the
    // transposed product is faster still where M < N (transpose_pays).
    c.dot = true;
    c.pack_a = c.pack_b = false;
    // M = 32: 4×6 121, 3×8 121, 5×5 108, 4×4 97, 2×8 97, 2×12 84, 8×2 62 at KC 4096; M = 8: 2×8 71, 1×8 51.
    // Two full-width FMA units take the 24-accumulator tile from 4 rows (Intel Xeon, ×4096×4096, 4×6 vs 2×8, 1 / 2
    // threads: M = 8 63 / 125 vs 42 / 84 GFLOP/s; M = 4 50 vs 37).
    const bool wide = avx512 && (problem.m >= 12 || (target.vector_fmas_per_cycle >= 2 && problem.m >= 4));
    c.mr = wide ? 4 : problem.m >= 2 ? 2 : 1;
    c.nr = wide ? 6 : problem.m >= 2 && !avx512 ? 5 : 8;  // AVX2 has 16 registers
    c.k_unroll = 2;
    // Up to M = 8, B streams once whatever KC; a deeper slab saves the partial sums (1×4096²: 14.2 vs 9.8).
    c.kc = problem.m <= 8 ? 4096 : 1024;
    c.mc = static_cast<int>((problem.m + c.mr - 1) / c.mr * c.mr);
    c.nc = 240;  // a multiple of 6 and 8; 17 column tiles for N = 4096 to share among threads
    return c;
  }
  if (problem.signature.a.dtype == DType::bf16) {
    // vdpbf16ps consumes K in pairs from a packed B panel; the register tile is the f32 one.
  } else if (!b_rows_contiguous && !small) {
    // Packing is what turns a column-major or strided B into NR-wide rows: keep the general shape.
    if (avx512 && target.vector_fmas_per_cycle >= 2 && problem.m > 32) {
      const TwoUnitTile t = packed_two_unit_tile(problem.k, lanes);
      c.mr = t.mr, c.nr = t.nr;
      slab_kc = t.kc;
    }
  } else if (small) {
    // Small: sizes compiled in, A and B read in place (16³×1024: 183 vs 112 GFLOP/s; 64³: 257 vs 199). A B without
    // contiguous rows is packed whole per matrix, still faster than the general kernel (Intel Xeon, 1 thread,
    // A·Bᵀ, GFLOP/s: 16³×256 64 vs 54, 32³×256 103 vs 92, 32³ 113 vs 100, 64³×64 124 vs 115).
    c.pack_b = !b_rows_contiguous;
    if (problem.n <= lanes) {
      c.nr = lanes;
      c.mr = avx512 ? 16 : 8;
    } else if (avx512 && problem.signature.d.layout.kind() == LayoutKind::ColMajor) {
      // D stored by columns (the transposed kernel of Aᵀ·Bᵀ, or asked for): 4-row tiles transpose into 4-float
      // columns cheaply (1 thread, GFLOP/s, 4×64 vs 8×32: Aᵀ·Bᵀ 64³ 101 vs 90, 32³ 72 vs 64, 48³ 93 vs 88,
      // 64×64×16 72 vs 66; A·B with D column-major 64³ 102 vs 92; A·B row-major D 64³ 111 vs 110).
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
    // B small enough to stay in L2 read in place: packing it is pure overhead (256³: 277 vs 268 GFLOP/s;
    // 1024×256×256: 273 vs 270), while from 384² on the packed panel wins (768³: 267 vs 251).
    c.pack_b = false;
  } else if (problem.m <= 2) {
    // GEMV-like: one row of A against wide rows of B streamed once (1×4096×4096: 11.3 vs 5.7 GFLOP/s). Four
    // vectors of each of the KC rows per tile keep the KC streams of B advancing together (Zen 4, 1×4096×4096,
    // 1 thread, tessera / BLIS over three interleaved runs: 1.04, 0.90, 1.04 vs 15 vectors 1.09, 0.83, 0.79).
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
    // AVX2: 12 accumulators in whichever of 4×24 and 6×16 pads M least, over B streamed in N-wide slabs (Zen 3,
    // 1 thread, ×4096×4096, GFLOP/s, medians of 4-5 interleaved runs: M = 8 4×24 38.3, 8×8 31.1, 2×40 29.5; M = 4
    // 4×24 26.7 vs 2×40 19.1; M = 6 6×16 31.2, 4×24 25.2, 2×40 23.6; M = 8 on 2 threads 4×24 54.9 vs 2×40 47.0).
    const bool six = (problem.m + 5) / 6 * 6 < (problem.m + 3) / 4 * 4;
    c.mr = six ? 6 : 4;
    c.nr = (six ? 2 : 3) * lanes;
    c.pack_b = false;
    skinny = true;
  } else if (problem.m <= 32 && avx512) {
    // Once full tiles of B read in place load unmasked, streaming B beats packing it up to M = 32 as well
    // (32×4096×4096, 1 thread: 107-114 vs 62-92 GFLOP/s packed with the 8×32 tile).
    c.mr = 4;
    c.nr = 6 * lanes;
    c.pack_b = false;
    skinny = true;
  } else if (problem.m <= 32) {
    // AVX2 (Zen 3, 1 thread, ×4096×4096, GFLOP/s): B packed in short slabs as wide as N beats B read in place
    // (M = 24: 49.8 vs 34.4; M = 32: 51-57 vs 32-38; M = 16: 39-41 vs 34), in 4×24 tiles (M = 32: 4×16 48,
    // 6×16 50, with a third of its last row tile idle).
    c.mr = 4;
    c.nr = 3 * lanes;
    short_wide_slabs = true;
  }
  if ((!avx512 || target.vector_fmas_per_cycle >= 2) && !c.fixed() &&
      problem.signature.a.layout.kind() == LayoutKind::ColMajor) {
    // AVX2: a column-major A read in place costs a cache line per K step of each 4-6-row sliver, which its 12-16
    // FMAs per step do not hide; packed, the sliver is contiguous (Zen 3, 1 thread, Aᵀ·B GFLOP/s, in place vs
    // packed: 1024³ 50 vs 89, 777×333×555 68 vs 84, 4096×128×4096 43 vs 70, 256³ 50 vs 69, 32×4096² 47 vs 58,
    // 8×4096² 29 vs 30). AVX-512 with two full-width FMA units packs it too: its 16 FMAs per K step take half the
    // cycles, so the sliver's line per step shows (Intel Xeon, 1 thread, Aᵀ·B GFLOP/s, in place vs packed: 1024³
    // 118-124 vs 147-152, 256³ 111 vs 146, 4096×128×4096 101 vs 122; 2 threads 1024³ 240 vs 299, 4096×128×4096 205
    // vs 241). A Zen 4 keeps A in place: its 8×32 tiles ran Aᵀ·B 1024³ at 100 GFLOP/s (0.98 of the best peer).
    c.pack_a = true;
    if (avx512 && c.pack_b && !skinny && !short_wide_slabs) {
      // (Where B is read in place, its slabs stay as the tile chose them: 64 deep to stream a large B, as for
      // 64×4096×4096, 8×48 KC 64 101 GFLOP/s vs 76 with these.)
      // A is packed once per macro-tile column: a 256-deep slab makes B's panel in half of L2 1024 columns wide,
      // so A is packed half as often as with 512×512 panels, and 8×32 tiles read the packed sliver best
      // (exhaustive tuning, 1 thread, Aᵀ·B 1024³: 6×64 KC 512 NC 512 140, 8×32 KC 256 NC 1024 155 GFLOP/s).
      // Interleaved in one process, GFLOP/s, 6×64 KC 512 (or the model's choice) vs 8×32 KC 256, 1 / 2 threads:
      // 2048³ 144 / 285 vs 150 / 296, 1024³ 145 / 292 vs 151 / 296, 128×4096×4096 124 / 249 vs 133 / 265,
      // 4096×128×4096 126 / 260 vs 129 / 264, 777×333×555 136 vs 138-140.
      // Three vectors where they pad N less (777×333×555: 8×48 147-148 vs 8×32 141, 2 threads 304 vs 289; 1000³ 156
      // vs 155; 500×700×600, where 48 pads more, 150 vs 154).
      const auto padded = [&](std::int64_t nr) { return (problem.n + nr - 1) / nr * nr; };
      c.mr = 8;
      c.nr = padded(3 * lanes) < padded(2 * lanes) ? 3 * lanes : 2 * lanes;
      slab_kc = 256;
    }
  }
  if (!skinny && !c.fixed() && problem.signature.a.dtype == DType::f32) {
    // Few columns (the transposed product of x·Wᵀ has the tokens as N): a packed panel is zero-padded to NR, so take
    // the narrowest tile that covers N (rc, ×4096×4096 transposed, 1 thread: M = 16 8×16 81 vs 8×32 44; M = 48
    // 8×48 93 vs 8×32 71). B read in place then runs the unrolled kernel, not the 1-vector edge one (cc 8×4096²
    // transposed: 38 vs 26).
    const int vectors = static_cast<int>((problem.n + lanes - 1) / lanes);
    if (c.pack_b ? vectors < c.nr / lanes || (avx512 && vectors == 3) : vectors == 1) c.nr = vectors * lanes;
  }
  // A KC×NR sliver of B shares L1 with A's MR×KC sliver; the KC×NC panel of B lives in half of L2 and MC rows of
  // micro-tiles reuse it (A is read in place, so MC only bounds the partial-sum tile).
  c.kc = std::clamp(round_down_positive(target.l1d_bytes / (4 * (std::min(c.nr, 2 * lanes) + c.mr)), 32), 64, 512);
  if (slab_kc > 0) c.kc = slab_kc;
  c.nc = std::clamp(round_down_positive(target.l2_bytes / 2 / (4 * c.kc), c.nr), c.nr, 32 * c.nr);
  // One or two rows: panels as wide as N (up to 64 tiles), as the variant space gives them.
  if (slab_kc > 0 && c.mr <= 2)
    c.nc = static_cast<int>(std::clamp<std::int64_t>((problem.n + c.nr - 1) / c.nr * c.nr, c.nr, 64 * c.nr));
  // AVX2 (measured on a Zen 3, whose 512 KB L2 makes that panel 176 columns wide): panels of 1024 columns, from
  // L2 and L3, cost fewer packing phases and thread hand-overs (KC 352, GFLOP/s, NC 176 vs 1024, two runs each:
  // 128×4096×4096 on 2 threads 105, 68 vs 149, 159; 2048³ on 2 threads 147, 133 vs 155, 100(noisy) and 159 at
  // 2048; 1024³ on 1 thread 88, 73 vs 89, 87; 512³ 87, 88 vs 88, 72).
  if (!avx512) c.nc = std::max(c.nc, round_down_positive(1024, c.nr));
  // MC bounds how many rows reuse one packed B panel; larger is better until the partial-sum tile (MC×NC) outgrows
  // the caches (2048³, 1 thread: MC 256 → 244, 512 → 250, 1024 → 256 GFLOP/s).
  c.mc = std::max(c.mr, 1024 / c.mr * c.mr);
  c.k_unroll = 4;
  if (skinny) {
    // Skinny: short K slabs over tiles as wide as N, so each row of B is read whole and B streams from memory in
    // order, while the partial sums (a row of N) stay in L1. Measured on 1 thread, ×4096×4096 (GFLOP/s):
    // M = 1: NC 3840 → N-wide 15.5 → 17.2 at KC 8 (16.8 at 16, 16.0 at 32); M = 2: 22.8 → 28 at KC 8;
    // M = 8: 64.0 → 66.7 at KC 16 (58 at KC 8); M = 32 at KC 16 above.
    c.kc = problem.m <= 2 ? 8 : 16;
    // Up to 2 rows the partial sums are at most 2 × 16384 floats, and a tile as wide as N splits evenly between
    // threads (1×11008×4096 on 2 threads, tessera / BLIS: 1.18-1.26 vs 0.77-0.97 with NC 4096 and 3 tiles).
    // AVX2's 12-accumulator tiles of 3 < M <= 8 rows: panels as wide as N (M = 8, 4×24: NC 4008 34.7 vs 1536 30.6).
    // Two-unit AVX-512 tiles: as wide as N up to 16384 too, so two threads split the columns evenly (32×4096², 8×48,
    // 2 threads: NC 4128 204 vs 3072 134 GFLOP/s).
    const bool two_units = avx512 && target.vector_fmas_per_cycle >= 2;
    const int widest = problem.m <= 2 || two_units ? 16384 / c.nr : avx512 ? 64 : 4096 / c.nr + 1;
    c.nc = static_cast<int>(std::clamp<std::int64_t>((problem.n + c.nr - 1) / c.nr * c.nr, c.nr, widest * c.nr));
    c.mc = 32 / c.mr * c.mr;
  }
  if (short_wide_slabs) {
    // (M = 32, NC 504 / 2016 / 4008: 41 / 48-57 / 51 GFLOP/s; KC 64 / 128 / 256: 46 / 48-57 / 53.)
    c.kc = 128;
    c.nc = static_cast<int>(std::clamp<std::int64_t>((problem.n + c.nr - 1) / c.nr * c.nr, c.nr, 167 * c.nr));
    c.mc = static_cast<int>((problem.m + c.mr - 1) / c.mr * c.mr);
  }
  if (problem.signature.a.dtype == DType::bf16) c.kc = 2 * c.kc;  // pairs: the same bytes of B per slab
  if (c.fixed()) {
    c.kc = std::max(c.fixed_k, 1);
    c.mc = (c.fixed_m + c.mr - 1) / c.mr * c.mr;
    c.nc = (c.fixed_n + c.nr - 1) / c.nr * c.nr;
  }
  return c;
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
    else
      throw InvalidArgument("config", "unknown key '" + key +
                                          "' (mr, nr, kc, mc, nc, k_unroll, pack_a, pack_b, fixed_m, fixed_n, fixed_k, "
                                          "dot, transpose)");
  }
  return c;
}

nlohmann::json CpuGemmConfig::to_json() const {
  nlohmann::json j = {{"mr", mr},           {"nr", nr},          {"kc", kc},
                      {"mc", mc},           {"nc", nc},          {"k_unroll", k_unroll},
                      {"pack_a", pack_a},   {"pack_b", pack_b},  {"fixed_m", fixed_m},
                      {"fixed_n", fixed_n}, {"fixed_k", fixed_k}};
  // Only when set: the configs (and so the spec hashes of tuning records and cached kernels) from before dot
  // kernels existed stay what they were.
  if (dot) j["dot"] = true;
  if (transpose) j["transpose"] = true;
  return j;
}

CpuGemmConfig CpuGemmConfig::from_json(const nlohmann::json& j) {
  CpuGemmConfig c;
  c.mr = j.at("mr").get<int>();
  c.nr = j.at("nr").get<int>();
  c.kc = j.at("kc").get<int>();
  c.mc = j.at("mc").get<int>();
  c.nc = j.at("nc").get<int>();
  c.k_unroll = j.at("k_unroll").get<int>();
  c.pack_a = j.at("pack_a").get<bool>();
  c.pack_b = j.at("pack_b").get<bool>();
  c.fixed_m = j.at("fixed_m").get<int>();
  c.fixed_n = j.at("fixed_n").get<int>();
  c.fixed_k = j.at("fixed_k").get<int>();
  c.dot = j.value("dot", false);
  c.transpose = j.value("transpose", false);
  return c;
}

std::int64_t CpuGemmConfig::workspace_bytes() const {
  // A dot kernel's partial sums are whole vectors per output (summed across lanes at the end).
  const std::int64_t partial_sums = std::int64_t{mc} * partial_sum_columns() * (dot ? kMaxVectorLanes : 1);
  const std::int64_t floats =
      (pack_a ? std::int64_t{mc} * kc : 0) + (pack_b ? std::int64_t{kc} * nc : 0) + partial_sums;
  return floats * 4 + 3 * 64;  // each region starts on a cache line
}

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
  for (const auto& [name, dtype] :
       {std::pair{"C", s.c.dtype}, std::pair{"D", s.d.dtype}, std::pair{"accumulator", s.accumulator}})
    if (dtype != DType::f32)
      fail(fmt::format("{} dtype {} is not supported on {} (f32 only)", name, dtype_name(dtype), target.str()));
  if (!bf16)
    for (const auto& [name, dtype] : {std::pair{"A", s.a.dtype}, std::pair{"B", s.b.dtype}})
      if (dtype != DType::f32)
        fail(fmt::format("{} dtype {} is not supported on {} (A and B both f32, or both bf16)", name, dtype_name(dtype),
                         target.str()));
  if (bf16) {
    if (!target.avx512_bf16) fail(fmt::format("bf16 GEMM needs avx512_bf16, which {} lacks", target.str()));
    if (s.a.layout.kind() != LayoutKind::RowMajor || s.b.layout.kind() != LayoutKind::RowMajor)
      fail("bf16 GEMM supports row-major A and B (pairs along K are read as 32-bit words)");
    if (c.pack_a || !c.pack_b) fail("bf16 GEMM reads A in place and packs B into K pairs (pack_a=0, pack_b=1)");
    if (c.kc % 2 != 0) fail(fmt::format("KC ({}) must be even for bf16 (K is consumed in pairs)", c.kc));
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
  if (c.dot) {
    if (c.nr < 1 || c.nr > lanes)
      fail(fmt::format("NR ({}) of a dot kernel must be in 1..{} (one lane of the result per column)", c.nr, lanes));
    const int registers = c.mr * c.nr + c.mr + 1;
    if (registers > target.vector_registers())
      fail(fmt::format("dot tile {}x{} needs {} vector registers ({} accumulators + {} A + 1 B), {} has {}", c.mr, c.nr,
                       registers, c.mr * c.nr, c.mr, target.str(), target.vector_registers()));
    if (s.a.dtype != DType::f32) fail("dot kernels are f32");
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
    if (registers > target.vector_registers())
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
