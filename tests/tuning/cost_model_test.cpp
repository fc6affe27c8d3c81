// Variant spaces, features and the cost models, checked against quantities known by construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "generator/core/cuda_rates.hpp"
#include "generator/core/error.hpp"
#include "generator/cost/cost_model.hpp"
#include "generator/cost/learned_model.hpp"
#include "generator/gemm/cuda_gemm_model.hpp"
#include "generator/gemm/gemm_features.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "generator/gemm/grid_plan.hpp"
#include "tessera/cost_models.hpp"
#include "tessera/model_eval.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {

GemmProblem problem(std::int64_t m, std::int64_t n, std::int64_t k, DType in = DType::f32) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.signature.a = {in, Layout::row_major()};
  p.signature.b = {in, Layout::row_major()};
  p.signature.c = {DType::f32, Layout::zero()};
  p.signature.d = {DType::f32, Layout::row_major()};
  return p;
}

// An AVX-512 core with a Zen 4's caches and two full-width FMA units (the space is enumerated and estimated, not
// run: any host can check it), all spelled out so that nothing follows the host: a Zen 3 has half the L2, and the
// FMA rate came from the host's probe, which took every host these tests were written on for a two-unit core.
CpuTarget avx512(int fmas_per_cycle = 2) {
  CpuTarget t = CpuTarget::host();
  t.isa = CpuIsa::Avx512;
  t.l1d_bytes = 32 << 10, t.l2_bytes = 1 << 20, t.l3_bytes = 32 << 20;
  t.vector_fmas_per_cycle = fmas_per_cycle;
  return t;
}

TEST(VariantSpace, EveryCpuVariantValidatesAndTheDefaultIsIncluded) {
  const CpuTarget t = avx512();
  for (auto [m, n, k] : {std::tuple{512, 512, 512}, {1, 4096, 1024}, {64, 64, 64}, {17, 131, 257}}) {
    const GemmProblem p = problem(m, n, k);
    const auto space = cpu_variants(p, t);
    const bool small = m <= 64 && n <= 64 && k <= 64;
    // One row: 1-row tiles over B in place only; small: the fixed-size kernels only (on AVX-512 they beat every
    // general one).
    EXPECT_GE(space.size(), small ? 6u : m == 1 ? 20u : 100u) << m << "x" << n << "x" << k;
    for (const auto& c : space) EXPECT_NO_THROW(validate(p.signature, c, t)) << to_json(c).dump();
    EXPECT_EQ(space[0], CpuGemmConfig::default_for(p, t));
    EXPECT_EQ(cpu_variants(p, t), space) << "deterministic";
    const auto fixed_count = std::count_if(space.begin(), space.end(), [](const auto& c) { return c.fixed(); });
    EXPECT_EQ(fixed_count, small ? static_cast<std::ptrdiff_t>(space.size()) : 0);
    // The reference space (features, model evaluation) keeps the general kernels of a small problem.
    const auto reference = cpu_feature_reference(p, t);
    EXPECT_GT(std::count_if(reference.begin(), reference.end(), [](const auto& c) { return !c.fixed(); }), 50);
  }
  // A small A·Bᵀ (where the dot kernels fit) gets the fixed-size kernels too, of the product as it is and of its
  // transpose: its space was default_for's one kernel.
  for (auto [m, batch] : {std::pair{16, 256}, {64, 64}, {64, 1}}) {
    GemmProblem p = problem(m, m, m);
    p.batch = batch;
    p.signature.b.layout = Layout::col_major();
    const auto space = cpu_variants(p, t);
    const auto direct =
        std::count_if(space.begin(), space.end(), [](const auto& c) { return c.fixed() && !c.transpose; });
    const auto flipped =
        std::count_if(space.begin(), space.end(), [](const auto& c) { return c.fixed() && c.transpose; });
    EXPECT_GE(direct, 4) << m << "³×" << batch;
    EXPECT_GE(flipped, 4) << m << "³×" << batch;
  }
  // Column-major B cannot be read in place: no unpacked-B variant.
  GemmProblem col = problem(256, 256, 256);
  col.signature.b.layout = Layout::col_major();
  for (const auto& c : cpu_variants(col, t)) EXPECT_TRUE(c.pack_b);
  // A is packed only where its rows are not contiguous: a row-major A's variants read it in place, a column-major
  // A's are offered both ways, for every tile and slab.
  const GemmProblem rows = problem(512, 512, 512);
  for (const auto& c : cpu_variants(rows, t)) EXPECT_TRUE(!c.pack_a || c == CpuGemmConfig::default_for(rows, t));
  GemmProblem cols = rows;
  cols.signature.a.layout = Layout::col_major();
  for (int fmas : {1, 2}) {  // default_for's config (its own slab and panel) aside
    const CpuTarget target = avx512(fmas);
    const auto col_space = cpu_variants(cols, target);
    for (const auto& c : col_space) {
      if (c.fixed() || c.transpose || c.pack_a || c == CpuGemmConfig::default_for(cols, target)) continue;
      CpuGemmConfig packed = c;
      packed.pack_a = true;
      EXPECT_NE(std::find(col_space.begin(), col_space.end(), packed), col_space.end()) << to_json(c).dump();
    }
  }
}

// A column-major A on a core with two full-width AVX-512 FMA units: packed in 8×32 slivers with 256-deep slabs where
// B is packed too; with B column-major as well, packed directly (not transposed) from N = 1024 up where M ≥ N. A core
// with one unit keeps the transposed product.
TEST(DefaultFor, TwoUnitAvx512PacksAColumnMajorA) {
  CpuTarget two = avx512();
  two.vector_fmas_per_cycle = 2;
  two.l1d_bytes = 48 << 10, two.l2_bytes = 2 << 20;
  CpuTarget one = two;
  one.vector_fmas_per_cycle = 1;
  const auto with = [](GemmProblem p, bool a_col, bool b_col) {
    if (a_col) p.signature.a.layout = Layout::col_major();
    if (b_col) p.signature.b.layout = Layout::col_major();
    return p;
  };
  const CpuGemmConfig cr = CpuGemmConfig::default_for(with(problem(1024, 1024, 1024), true, false), two);
  EXPECT_TRUE(cr.pack_a && cr.pack_b && !cr.transpose);
  EXPECT_EQ(cr.mr, 8);
  EXPECT_EQ(cr.nr, 32);
  EXPECT_EQ(cr.kc, 256);
  EXPECT_EQ(cr.nc, 1024) << "B's 256-deep panel in half of L2";
  EXPECT_EQ(CpuGemmConfig::default_for(with(problem(777, 333, 555), true, false), two).nr, 48)
      << "336 pads less than 352";
  EXPECT_EQ(CpuGemmConfig::default_for(with(problem(500, 700, 600), true, false), two).nr, 32) << "704 less than 720";
  for (auto [m, n, direct] : {std::tuple{1024, 1024, true},
                              {2048, 2048, true},
                              {4096, 1024, true},
                              {1024, 512, false},
                              {512, 512, false},
                              {128, 4096, false},
                              {777, 333, false}}) {
    const GemmProblem cc = with(problem(m, n, 1024), true, true);
    const CpuGemmConfig c = CpuGemmConfig::default_for(cc, two);
    EXPECT_EQ(c.transpose, !direct) << m << "x" << n;
    EXPECT_TRUE(!direct || (c.pack_a && c.pack_b));
    EXPECT_TRUE(CpuGemmConfig::default_for(cc, one).transpose) << m << "x" << n;
  }
}

// A general kernel's tile taller than the shortest tile covering the problem's rows recomputes clamped rows: out of
// the space, but still in the features' reference space.
TEST(VariantSpace, NoTileRecomputesRowsTheShortestCoveringTileWouldNot) {
  const CpuTarget t = avx512();
  for (auto [m, tallest] : {std::pair{1, 1}, {2, 2}, {3, 4}, {5, 6}, {10, 12}, {40, 12}}) {
    const GemmProblem p = problem(m, 1024, 512);
    const CpuGemmConfig base = CpuGemmConfig::default_for(p, t);
    int highest = 0;
    for (const auto& c : cpu_variants(p, t))
      if (!c.fixed() && !(c == base)) highest = std::max(highest, c.mr);
    EXPECT_EQ(highest, tallest) << "M = " << m;
    const auto reference = cpu_feature_reference(p, t);
    EXPECT_TRUE(std::any_of(reference.begin(), reference.end(), [](const auto& c) { return c.mr == 12; }));
  }
  CpuGemmConfig c = CpuGemmConfig::default_for(problem(256, 256, 256), t);
  c.fixed_m = c.fixed_n = c.fixed_k = 0, c.dot = false, c.mr = 4;
  EXPECT_TRUE(recomputes_rows(problem(2, 256, 256), c));
  EXPECT_FALSE(recomputes_rows(problem(3, 256, 256), c));
  c.transpose = true;  // the kernel's rows are D's columns
  EXPECT_FALSE(recomputes_rows(problem(2, 256, 256), c));
  EXPECT_TRUE(recomputes_rows(problem(256, 2, 256), c));
  c.transpose = false, c.fixed_m = 2, c.fixed_n = c.fixed_k = 256;  // fixed kernels compute only the live rows
  EXPECT_FALSE(recomputes_rows(problem(2, 256, 256), c));
}

// One or two rows of A against a row-major f32 B: no general kernel packs B (each packed element would serve at most
// two FMAs); from three rows, and for a column-major B (packing is what gives it rows), they stay.
TEST(VariantSpace, OneOrTwoRowsDoNotPackARowMajorB) {
  const CpuTarget t = avx512();
  const auto packs = [&](const GemmProblem& p) {
    const auto space = cpu_variants(p, t);
    return std::count_if(space.begin() + 1, space.end(), [](const auto& c) { return c.pack_b && !c.fixed(); });
  };
  for (int m : {1, 2}) {
    EXPECT_EQ(packs(problem(m, 490, 1112)), 0) << "M = " << m;
    const auto reference = cpu_feature_reference(problem(m, 490, 1112), t);
    EXPECT_TRUE(std::any_of(reference.begin(), reference.end(), [](const auto& c) { return c.pack_b; }));
  }
  EXPECT_GT(packs(problem(3, 490, 1112)), 0);
  GemmProblem col = problem(1, 490, 1112);
  col.signature.b.layout = Layout::col_major();
  EXPECT_GT(packs(col), 0);
  CpuGemmConfig c = CpuGemmConfig::default_for(problem(256, 256, 256), t);
  c.fixed_m = c.fixed_n = c.fixed_k = 0, c.dot = false, c.mr = 1, c.pack_b = true;
  EXPECT_TRUE(packs_b_for_few_rows(problem(1, 256, 256), c));
  EXPECT_TRUE(outside_space(problem(1, 256, 256), c));
  c.transpose = true;  // the kernel's rows are D's columns, its B is Aᵀ
  EXPECT_FALSE(packs_b_for_few_rows(problem(1, 256, 256), c));
}

TEST(VariantSpace, CudaVariantsValidate) {
  for (const char* arch : {"cuda:sm_80", "cuda:sm_86", "cuda:sm_90"})
    for (DType in : {DType::f16, DType::tf32, DType::f32}) {
      const CudaTarget t = CudaTarget::parse(arch);
      const GemmProblem p = problem(2048, 2048, 2048, in);
      const auto space = cuda_variants(p, t);
      EXPECT_GE(space.size(), in == DType::f32 ? 10u : 100u) << arch;
      for (const auto& c : space) EXPECT_NO_THROW(validate(p.signature, c, t));
      const auto scores = cuda_analytic_scores(p, space, t);
      for (double s : scores) EXPECT_TRUE(std::isfinite(s) && s > 0);
    }
}

// The CUDA model is physical: no variant of any shape is predicted above the peak of the instruction its kernel
// uses (mma.sync or FFMA), on any architecture.
TEST(CudaModel, NeverPredictsAboveThePeak) {
  for (const char* arch : {"cuda:sm_80", "cuda:sm_86", "cuda:sm_89", "cuda:sm_90"})
    for (DType in : {DType::f16, DType::bf16, DType::tf32, DType::f32}) {
      const CudaTarget t = CudaTarget::parse(arch);
      const double peak = cuda_peak_flops(t, in);
      for (auto [m, n, k, batch] : {std::tuple{8192, 8192, 8192, 1},
                                    {4096, 4096, 4096, 1},
                                    {1536, 1152, 8192, 1},
                                    {16, 4096, 4096, 1},
                                    {256, 256, 256, 64},
                                    {1, 1, 1, 1},
                                    {100, 3000, 70, 3}}) {
        GemmProblem p = problem(m, n, k, in);
        p.batch = batch;
        for (const auto& c : cuda_variants(p, t)) {
          const CudaGemmEstimate e = cuda_gemm_estimate(p, c, t);
          ASSERT_TRUE(std::isfinite(e.seconds) && e.seconds > 0) << arch;
          ASSERT_LE(p.flops() / e.seconds, peak)
              << arch << " " << m << "x" << n << "x" << k << " " << to_json(c).dump();
          ASSERT_FALSE(e.bound.empty());
        }
      }
    }
  // sm_90a with K-major operands: the wgmma kernel's variants beside mma.sync's, each under its own instruction's
  // peak.
  const CudaTarget hopper = CudaTarget::parse("cuda:sm_90a");
  int wgmma_variants = 0;
  for (DType in : {DType::f16, DType::bf16})
    for (auto [m, n, k] : {std::tuple{8192, 8192, 8192}, {4096, 4096, 4096}, {64, 4096, 4096}, {200, 136, 72}}) {
      GemmProblem p = problem(m, n, k, in);
      p.signature.b.layout = Layout::col_major();
      for (const auto& c : cuda_variants(p, hopper)) {
        const CudaGemmEstimate e = cuda_gemm_estimate(p, c, hopper);
        const bool wgmma = c.math == CudaMath::Wgmma;
        wgmma_variants += wgmma;
        ASSERT_TRUE(std::isfinite(e.seconds) && e.seconds > 0);
        ASSERT_LE(p.flops() / e.seconds, cuda_peak_flops(hopper, in, wgmma))
            << m << "x" << n << "x" << k << " " << to_json(c).dump();
      }
    }
  EXPECT_GT(wgmma_variants, 100);
  // Hopper's device peak is wgmma's; mma.sync kernels stay below two thirds of it.
  const CudaTarget h100 = CudaTarget::parse("cuda:sm_90");
  EXPECT_NEAR(cuda_peak_flops(h100, DType::bf16, true) / 1e12, 989.4, 1.0);
  EXPECT_LT(cuda_peak_flops(h100, DType::bf16), cuda_peak_flops(h100, DType::bf16, true) * 0.7);
  EXPECT_NEAR(cuda_peak_flops(CudaTarget::parse("cuda:sm_80"), DType::f16) / 1e12, 311.9, 1.0);
}

// The best predicted kernels for the shapes NVIDIA and CUTLASS publish land where mma.sync kernels do: A100 f16
// 8192³ near CUTLASS's 235 TFLOP/s (75% of peak); on H100 below cuBLAS's 798 (it uses wgmma, which these do not).
TEST(CudaModel, PublishedShapesLandNearTheirFigures) {
  const auto best = [](const char* arch, DType in, std::int64_t size) {
    const CudaTarget t = CudaTarget::parse(arch);
    const GemmProblem p = problem(size, size, size, in);
    const auto space = cuda_variants(p, t);
    const auto scores = cuda_analytic_scores(p, space, t);
    return p.flops() / *std::min_element(scores.begin(), scores.end()) / 1e12;
  };
  const double a100 = best("cuda:sm_80", DType::f16, 8192);
  EXPECT_GT(a100, 0.6 * 312);
  EXPECT_LT(a100, 0.85 * 312);
  const double h100 = best("cuda:sm_90", DType::bf16, 8192);
  EXPECT_GT(h100, 0.35 * 989);
  EXPECT_LT(h100, 0.67 * 989);
  EXPECT_LT(best("cuda:sm_80", DType::f32, 8192), 19.5);
}

// Blocks resident on one SM share its tensor cores: twice the blocks of a compute-bound shape on the same SMs take
// about twice as long (the old model gave each block the whole SM).
TEST(CudaModel, BlocksOnOneSmShareIt) {
  const CudaTarget t = CudaTarget::parse("cuda:sm_80");
  CudaGemmConfig c = CudaGemmConfig::default_for(problem(1536, 1152, 8192, DType::f16), t);
  c.block_m = c.block_n = 128, c.warp_m = c.warp_n = 64, c.split_k = 1;
  const GemmProblem one_wave = problem(1536, 1152, 8192, DType::f16);  // 108 tiles on 108 SMs
  const GemmProblem two = problem(3072, 1152, 8192, DType::f16);       // 216: two per SM
  const CudaGemmEstimate a = cuda_gemm_estimate(one_wave, c, t), b = cuda_gemm_estimate(two, c, t);
  EXPECT_EQ(a.bound, "tensor");
  EXPECT_GT(b.seconds / a.seconds, 1.8);
  EXPECT_NEAR(a.sm_busy, 1.0, 1e-9);
  // One more tile leaves a second round with one busy SM: the tail costs nearly a whole round.
  const CudaGemmEstimate tail = cuda_gemm_estimate(problem(1536 + 128, 1152, 8192, DType::f16), c, t);
  EXPECT_GT(tail.seconds / a.seconds, 1.5);
  EXPECT_LT(tail.sm_busy, 0.6);
}

// Split-K's reduction runs after the main kernel: splitting a shape that already fills the machine only costs.
TEST(CudaModel, SplitKPaysOnlyWhenTheGridIsSmall) {
  const CudaTarget t = CudaTarget::parse("cuda:sm_80");
  const auto with_split = [&](const GemmProblem& p, int split) {
    CudaGemmConfig c = CudaGemmConfig::default_for(p, t);
    c.split_k = split;
    return cuda_analytic_seconds(p, c, t);
  };
  const GemmProblem full = problem(4096, 4096, 4096, DType::f16), small = problem(256, 256, 16384, DType::f16);
  EXPECT_GT(with_split(full, 4), with_split(full, 1));
  EXPECT_LT(with_split(small, 8), with_split(small, 1) * 0.5);
}

TEST(Features, AreFiniteAndNamed) {
  const CpuTarget t = avx512();
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {4096, 4096, 4096}, {3, 1021, 7}}) {
    const GemmProblem p = problem(m, n, k);
    for (const auto& c : cpu_variants(p, t)) {
      const auto f = cpu_features(p, c, t);
      ASSERT_EQ(f.size(), cpu_feature_names().size());
      for (float x : f) ASSERT_TRUE(std::isfinite(x)) << to_json(c).dump();
    }
  }
}

// The features over the space's best compare a variant with the problem's whole variant space, not with the others
// ranked alongside it: the same variant gets the same row whatever it is ranked with.
TEST(Features, OverTheBestCompareWithTheWholeSpace) {
  const CpuTarget t = avx512();
  const auto& names = cpu_feature_names();
  const auto column = [&](const char* name) {
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  const std::size_t over = column("log_analytic_over_best"), absolute = column("log_analytic");
  ASSERT_LT(over, names.size());
  for (auto [m, n, k] : {std::tuple{4, 1536, 512}, {777, 333, 555}}) {
    const GemmProblem p = problem(m, n, k);
    const auto space = cpu_variants(p, t);
    const auto all = cpu_feature_rows(p, space, t);
    float lowest = INFINITY;
    for (std::size_t i = 0; i < space.size(); ++i) lowest = std::min(lowest, all[i * names.size() + absolute]);
    for (std::size_t i = 0; i < space.size(); ++i) {
      const float* row = &all[i * names.size()];
      EXPECT_NEAR(row[over], row[absolute] - lowest, 1e-4);
      EXPECT_GE(row[over], 0.0f);
    }
    // Ranked alone, the last variant keeps its row.
    const auto alone = cpu_feature_rows(p, {space.back()}, t);
    for (std::size_t f = 0; f < names.size(); ++f)
      EXPECT_EQ(alone[f], all[(space.size() - 1) * names.size() + f]) << names[f];
  }
}

TEST(AnalyticModel, PrefersRegisterTilesThatFeedTheFmaUnits) {
  const CpuTarget t = avx512();
  const GemmProblem p = problem(1024, 1024, 1024);
  CpuGemmConfig big = CpuGemmConfig::default_for(p, t), tiny = big;
  tiny.mr = 1, tiny.nr = 16, tiny.mc = 1024;
  const auto scores = AnalyticCpuModel().score(p, {big, tiny}, t);
  EXPECT_LT(scores[0], 0.6 * scores[1]) << "an 8x32 tile keeps both FMA ports busy; a 1x16 one waits on its loads";
}

TEST(AnalyticModel, StreamsABReadOnceInPlaceAndPacksOneReadByManyRows) {
  const CpuTarget t = avx512();
  // One row of micro-tiles reads B once: packing it first only adds a pass over its 64 MB.
  const GemmProblem skinny = problem(4, 4096, 4096);
  CpuGemmConfig in_place = CpuGemmConfig::default_for(skinny, t), packed = in_place;
  in_place.pack_b = false, packed.pack_b = true;
  auto scores = AnalyticCpuModel().score(skinny, {in_place, packed}, t);
  EXPECT_LT(scores[0], scores[1]);
  // Many rows re-read a KC×NC panel: from L2 when it fits half of it, from L3 (strided, KC rows at once) when not.
  // (2000 columns: rows 8000 bytes apart spread over the cache's sets.)
  const GemmProblem square = problem(2048, 2000, 2048);
  CpuGemmConfig fits = CpuGemmConfig::default_for(square, t), outgrows = fits;
  fits.pack_b = outgrows.pack_b = false;
  fits.kc = 128, fits.nc = 10 * fits.nr;              // at most 320 KB
  outgrows.kc = 384, outgrows.nc = 40 * outgrows.nr;  // at least 960 KB
  scores = AnalyticCpuModel().score(square, {fits, outgrows}, t);
  EXPECT_LT(scores[0], scores[1]);
}

// B rows a power of two apart fall on a few sets of L1 and L2: a panel of them read in place by many rows of
// micro-tiles is evicted long before it fills L2, and costs more than the same panel of rows that spread.
TEST(AnalyticModel, InPlaceRowsThatShareCacheSetsCostMore) {
  CpuTarget t = avx512();
  t.isa = CpuIsa::Avx2, t.avx512_bf16 = false, t.l2_bytes = 512 << 10;  // a Zen 3 core
  const GemmProblem conflicting = problem(256, 1024, 1024), spread = problem(256, 1020, 1024);
  CpuGemmConfig c = CpuGemmConfig::default_for(conflicting, t);
  c.mr = 6, c.nr = 16, c.mc = 96;                 // 12 FMAs for 2 vectors of B per K step
  c.pack_b = false, c.kc = 128, c.nc = 8 * c.nr;  // a 64 KB panel: an eighth of L2, by size alone it fits
  ASSERT_EQ((1024 + c.nr - 1) / c.nr, (1020 + c.nr - 1) / c.nr) << "the same number of micro-tiles";
  EXPECT_GT(cpu_analytic_parts(conflicting, c, t).compute, 1.2 * cpu_analytic_parts(spread, c, t).compute);
  CpuGemmConfig packed = c;
  packed.pack_b = true;
  const auto scores = AnalyticCpuModel().score(conflicting, {c, packed}, t);
  EXPECT_GT(scores[0], scores[1]) << "packing B is worth a pass when its rows conflict";
}

// A target with no shipped model ranks default_for's config first and the rest in the analytic model's order.
TEST(DefaultFirstModel, RanksTheDefaultFirstThenTheAnalyticOrder) {
  CpuTarget avx2 = CpuTarget::host();
  avx2.isa = CpuIsa::Avx2, avx2.avx512_bf16 = false;
  avx2.l1d_bytes = 32 << 10, avx2.l2_bytes = 512 << 10, avx2.l3_bytes = 32 << 20;  // a Zen 3 core
  const DefaultFirstCpuModel model;
  for (auto [m, n, k] : {std::tuple{1024, 1024, 1024}, {4, 4096, 4096}, {24, 4096, 4096}, {37, 53, 41}}) {
    const GemmProblem p = problem(m, n, k);
    const auto space = cpu_variants(p, avx2);
    const auto order = rank_by_score(model.score(p, space, avx2));
    EXPECT_EQ(space[order[0]], CpuGemmConfig::default_for(p, avx2)) << m << "x" << n << "x" << k;
    const auto analytic = AnalyticCpuModel().score(p, space, avx2);
    for (std::size_t i = 2; i < order.size(); ++i) EXPECT_LE(analytic[order[i - 1]], analytic[order[i]]);
  }
}

TEST(AnalyticModel, ACold8MegabyteBComesFromMemoryAndTheKernelsOperandsFollowATranspose) {
  const CpuTarget t = avx512();
  // 8 MB of B fits L3: called again and again it streams from there; as a layer's weights it comes from memory.
  GemmProblem hot = problem(4, 2048, 1024), cold = hot;
  cold.b_cold = true;
  CpuGemmConfig c = CpuGemmConfig::default_for(hot, t);
  c.pack_b = false, c.mr = 4;  // one row of micro-tiles: B streams once, in place
  const CpuAnalyticParts h = cpu_analytic_parts(hot, c, t), k = cpu_analytic_parts(cold, c, t);
  // Memory gives half L3's bytes per cycle (6 against 12): the compute part, bound by B's stream, doubles.
  EXPECT_NEAR(k.compute / h.compute, 2.0, 0.05);
  const auto fh = cpu_features(hot, c, t), fc = cpu_features(cold, c, t);
  const auto& names = cpu_feature_names();
  const auto at = [&](const std::vector<float>& f, const char* name) {
    return f[static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin())];
  };
  EXPECT_EQ(at(fh, "b_cold"), 0.0f);
  EXPECT_EQ(at(fc, "b_cold"), 1.0f);
  EXPECT_EQ(at(fc, "a_cold"), 0.0f);
  // A transposed kernel computes Dᵀ = Bᵀ·Aᵀ: the cold weights are its A.
  const GemmProblem flipped = transposed(cold);
  EXPECT_TRUE(flipped.a_cold);
  EXPECT_FALSE(flipped.b_cold);
  EXPECT_EQ(transposed(flipped).b_cold, true);
}

// Problems whose times are a known function of the features: the analytic estimate itself, distorted per config.
std::vector<RecordedProblem> synthetic_problems(const CpuTarget& t, int count) {
  std::vector<RecordedProblem> problems;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> size(8, 700);
  for (int i = 0; i < count; ++i) {
    RecordedProblem p;
    p.problem = problem(size(rng), size(rng), size(rng));
    p.family = i % 2 ? "even" : "odd";
    const auto space = cpu_variants(p.problem, t);
    for (std::size_t j = 0; j < space.size(); j += 3) {
      p.configs.push_back(space[j]);
      // "Measured" time: analytic cycles, 25% slower for unpacked B (a rule the analytic model does not know).
      p.ns.push_back(cpu_analytic_cycles(p.problem, space[j], t) * (space[j].pack_b ? 1.0 : 1.25));
    }
    if (std::find(p.configs.begin(), p.configs.end(), space[0]) == p.configs.end()) {
      p.configs.push_back(space[0]);
      p.ns.push_back(cpu_analytic_cycles(p.problem, space[0], t) * (space[0].pack_b ? 1.0 : 1.25));
    }
    problems.push_back(std::move(p));
  }
  return problems;
}

// Records of one machine kind described by two tessera versions (before and after the L3 and the FMA rate were
// described) pool into one set of problems; a machine with another FMA rate stays apart.
TEST(ModelEval, DescriptionsOfOneMachineKindPool) {
  const CpuTarget t = avx512();
  const GemmProblem p = problem(64, 256, 128), q = problem(96, 96, 96);
  const auto space = cpu_variants(p, t), other = cpu_variants(q, t);
  const std::string old_text = "AMD EPYC (family 25); L1d 32 KiB, L2 1024 KiB",
                    new_text = "AMD EPYC (family 25); L1d 32 KiB, L2 1024 KiB, L3 32768 KiB, AVX-512 FMAs 1/cycle",
                    fma2_text = "AMD EPYC (family 25); L1d 32 KiB, L2 1024 KiB, L3 32768 KiB, AVX-512 FMAs 2/cycle";
  std::vector<TuningRecord> records;
  const auto add = [&](const GemmProblem& at, const CpuGemmConfig& c, const std::string& hardware, double ns) {
    records.push_back({to_json(c).dump(), "gemm", record_problem(at), "square", to_json(at.signature).dump(),
                       to_json(c).dump(), t.str(), hardware, 1, ns, 0.01, 5, "0.3.0", "2026-11-27T00:00:00Z"});
  };
  for (int i = 0; i < 3; ++i) add(p, space[i], old_text, 100.0 + i);
  for (int i = 0; i < 3; ++i) add(q, other[i], new_text, 200.0 + i);
  for (int i = 0; i < 5; ++i) add(problem(32, 32, 32), cpu_variants(problem(32, 32, 32), t)[0], fma2_text, 50.0 + i);
  const auto problems = recorded_problems(records, t.str());
  ASSERT_EQ(problems.size(), 2u) << "the two descriptions of one machine: two problems, the other machine's left out";
  for (const auto& rp : problems) {
    EXPECT_EQ(rp.configs.size(), 3u);
    EXPECT_EQ(rp.hardware, new_text);
  }
}

// With every host, the same shape timed on two machines is two problems, each described by its own machine, and each
// problem's features use that machine's caches (a B of 1.5 MiB is beyond one machine's L2 and within the other's).
TEST(ModelEval, EveryHostKeepsEachMachinesProblemsWithItsOwnCaches) {
  const CpuTarget t = avx512();
  const GemmProblem p = problem(64, 768, 512);  // B: 1.5 MiB
  const auto space = cpu_variants(p, t);
  const std::string small_l2 = "AMD EPYC (family 26); L1d 48 KiB, L2 1024 KiB, L3 32768 KiB, AVX-512 FMAs 2/cycle",
                    large_l2 = "Intel Xeon (family 6); L1d 48 KiB, L2 2048 KiB, L3 266240 KiB, AVX-512 FMAs 2/cycle";
  std::vector<TuningRecord> records;
  for (const std::string& hardware : {small_l2, large_l2, large_l2})
    for (int i = 0; i < 3; ++i)
      records.push_back({to_json(space[i]).dump() + hardware, "gemm", record_problem(p), "square",
                         to_json(p.signature).dump(), to_json(space[i]).dump(), t.str(), hardware, 1, 100.0 + i, 0.01,
                         5, "0.3.2", "2026-11-28T00:00:00Z"});
  const auto most = recorded_problems(records, t.str());
  ASSERT_EQ(most.size(), 1u);
  EXPECT_EQ(most[0].hardware, large_l2) << "the most common machine's only";
  const auto every = recorded_problems(records, t.str(), RecordedHosts::every);
  ASSERT_EQ(every.size(), 2u) << "one problem per machine";
  EXPECT_NE(every[0].hardware, every[1].hardware);
  const TrainingSet set = training_set(every, t);
  const std::size_t columns = cpu_feature_names().size(),
                    b_over_l2 = static_cast<std::size_t>(
                        std::find(cpu_feature_names().begin(), cpu_feature_names().end(), "b_over_l2") -
                        cpu_feature_names().begin());
  ASSERT_LT(b_over_l2, columns);
  // Problem 0's first row against problem 1's first row (the same config): B over each machine's own L2.
  const double first = set.features[b_over_l2], second = set.features[every[0].configs.size() * columns + b_over_l2];
  const bool small_first = every[0].hardware == small_l2;
  EXPECT_NEAR(small_first ? first / second : second / first, 2.0, 1e-6) << "features with each machine's L2";
}

TEST(ModelEval, ANoiseFloorCountsOnlyVariantsTimedMoreThanOnce) {
  const CpuTarget t = avx512();
  const GemmProblem p = problem(64, 256, 128);
  const auto space = cpu_variants(p, t);
  ASSERT_GE(space.size(), 4u);
  std::vector<TuningRecord> records;
  // Two variants timed five times (spreads 2% and 4%), two dropped after one call (spread 0 by construction).
  const std::vector<std::pair<double, int>> spread_samples{{0.02, 5}, {0.04, 5}, {0.0, 1}, {0.0, 1}};
  for (std::size_t i = 0; i < spread_samples.size(); ++i)
    records.push_back({to_json(space[i]).dump(), "gemm", record_problem(p), "square", to_json(p.signature).dump(),
                       to_json(space[i]).dump(), t.str(), "host", 1, 1000.0 * static_cast<double>(i + 1),
                       spread_samples[i].first, spread_samples[i].second, "0.2.0", "2026-11-23T00:00:00Z"});
  const auto problems = recorded_problems(records, t.str());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].configs.size(), 4u);
  EXPECT_NEAR(problems[0].spread, 0.04, 1e-12);  // the upper median of {0.02, 0.04}, not of {0, 0, 0.02, 0.04}
}

TEST(ModelEval, RetestRegretJudgesTheFirstRunsBestByTheSecondRunsTimes) {
  const CpuTarget t = avx512();
  const auto space = cpu_variants(problem(64, 256, 128), t);
  ASSERT_GE(space.size(), 3u);
  RecordedProblem first{problem(64, 256, 128), "square", {space[0], space[1], space[2]}, {100, 90, 120}, 0, "", {}};
  RecordedProblem second = first;
  second.ns = {100, 110, 120};  // the first run's best (variant 1) is 10% slower than the second run's best
  RecordedProblem other{problem(32, 32, 32), "small", {space[0], space[1]}, {5, 6}, 0, "", {}};
  RecordedProblem other_again = other;  // the same best: no regret
  RecordedProblem unmatched{problem(16, 16, 16), "small", {space[0], space[1]}, {5, 6}, 0, "", {}};
  const auto r = retest_regret({first, other, unmatched}, {second, other_again});
  EXPECT_EQ(r["problems"].get<int>(), 2);
  EXPECT_NEAR(r["regret_mean"].get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(r["regret_max"].get<double>(), 0.10, 1e-12);
  EXPECT_NEAR(r["by_family"]["square"].get<double>(), 0.10, 1e-12);
  EXPECT_NEAR(r["by_family"]["small"].get<double>(), 0.0, 1e-12);
}

TEST(ModelEval, TwinVariantsAreThoseWhoseBlocksExceedTheProblem) {
  const CpuTarget t = avx512();
  CpuGemmConfig base = CpuGemmConfig::default_for(problem(64, 256, 128), t);
  base.fixed_m = base.fixed_n = base.fixed_k = 0;
  base.mr = 8, base.nr = 32, base.mc = 64, base.nc = 256, base.kc = 128;
  CpuGemmConfig deeper = base, wider = base, other_tile = base, two_slabs = base, two_slabs_twin = base;
  deeper.kc = 384;    // still one K slab of 128
  wider.nc = 512;     // still one column of macro-tiles
  wider.mc = 1024;    // and one row
  other_tile.mr = 4;  // different work
  other_tile.mc = 64;
  two_slabs.kc = 64;  // two slabs: not a twin of the others
  two_slabs_twin.kc = 64;
  two_slabs_twin.nc = 1024;
  RecordedProblem p{problem(64, 256, 128),
                    "square",
                    {base, deeper, wider, other_tile, two_slabs, two_slabs_twin},
                    {100, 104, 110, 50, 200, 201},
                    0,
                    "",
                    {}};
  const nlohmann::json r = twin_variant_spread({p});
  EXPECT_EQ(r["groups"].get<int>(), 2);                        // {base, deeper, wider}, {two_slabs, its twin}
  EXPECT_NEAR(r["spread_max"].get<double>(), 0.10, 1e-12);     // 110 / 100
  EXPECT_NEAR(r["spread_median"].get<double>(), 0.10, 1e-12);  // upper median of {0.005, 0.10}
  EXPECT_EQ(twin_variant_spread({})["groups"].get<int>(), 0);
}

// Measured ties (within 3%) go to the tile issuing fewest loads per FMA; GEMV-like, fixed and dot tiles do not take
// part, and a variant more than 3% slower is no tie.
TEST(LearnedModel, MeasuredTiesGoToTheTileIssuingFewestLoads) {
  const auto tile = [](int mr, int nr, int kc) {
    CpuGemmConfig c;
    c.mr = mr, c.nr = nr, c.kc = kc;
    return c;
  };
  const std::vector<CpuGemmConfig> configs{tile(8, 32, 256), tile(6, 64, 256), tile(6, 64, 384), tile(8, 48, 384),
                                           tile(2, 64, 128)};
  EXPECT_NEAR(configs[0].loads_per_fma(16), 10.0 / 16.0, 1e-12);
  EXPECT_NEAR(configs[1].loads_per_fma(16), 10.0 / 24.0, 1e-12);
  const double tie = std::log2(1.02), apart = std::log2(1.05);
  // 6x64 at KC 384 is the faster of the two 6x64 ties.
  EXPECT_EQ(fewest_loads_among_ties(configs, {0, tie, tie / 2, tie, 0.2}, 16), 2u);
  EXPECT_EQ(fewest_loads_among_ties(configs, {0, apart, apart, tie, 0.2}, 16), 3u);  // 8x48 (11 / 24)
  EXPECT_EQ(fewest_loads_among_ties(configs, {0, apart, apart, apart, 0.2}, 16), 0u);
  EXPECT_EQ(fewest_loads_among_ties(configs, {0.2, 0.2, 0.2, 0.2, 0}, 16), 4u);  // a 2-row tile keeps its place
  std::vector<CpuGemmConfig> fixed = configs;
  fixed[0].fixed_m = fixed[0].fixed_n = fixed[0].fixed_k = 64;
  EXPECT_EQ(fewest_loads_among_ties(fixed, {0, tie, tie, tie, 0.2}, 16), 0u);
}

TEST(LearnedModel, LearnsARuleTheAnalyticModelLacksAndRoundTrips) {
  const CpuTarget t = avx512();
  const auto problems = synthetic_problems(t, 30);
  TrainingOptions options;
  options.rounds = 80;
  // One XGBoost thread: its OpenMP workers spin while waiting, and beside other suites on the same cores two of them
  // ran 30x slower than alone.
  options.threads = 1;
  const nlohmann::json report = evaluate_cost_models(problems, "random", t, options);
  EXPECT_EQ(report["problems"], 30);
  EXPECT_LT(report["learned"]["top1_regret_mean"].get<double>(), 0.05) << report.dump();
  EXPECT_GT(report["learned"]["kendall_tau"].get<double>(), 0.8) << report.dump();
  EXPECT_GT(report["analytic"]["kendall_tau"].get<double>(), 0.5);
  EXPECT_TRUE(report["default"]["kendall_tau"].is_null());
  for (const char* key :
       {"top1_regret_p90", "top1_regret_max", "top5_score", "measurements_to_98", "measurements_to_99"})
    EXPECT_TRUE(report["learned"].contains(key)) << key;
  const nlohmann::json family = evaluate_cost_models(problems, "family", t, options);
  EXPECT_EQ(family["folds"].size(), 2u);
  // Picks whose time is a single sample are counted, and the mean without them reported beside the mean.
  auto once = problems;
  std::size_t marked = 0;
  for (auto& p : once) {
    const auto scores = AnalyticCpuModel().score(p.problem, p.configs, t);
    const auto pick = static_cast<std::size_t>(std::min_element(scores.begin(), scores.end()) - scores.begin());
    p.samples.assign(p.configs.size(), 5);
    if (&p - once.data() < 10) p.samples[pick] = 1, ++marked;
  }
  const nlohmann::json timed = evaluate_cost_models(once, "random", t, options);
  EXPECT_EQ(timed["analytic"]["top1_picks_timed_once"].get<std::size_t>(), marked);
  EXPECT_TRUE(timed["analytic"]["top1_regret_mean_picks_timed_twice"].is_number());

  // Problems timed with B cold that no training problem was: the runtime gives them default_for, so its top-1
  // regret on them is the default's.
  auto cold = problems;
  for (std::size_t i = 0; i < cold.size(); i += 2) cold[i].problem.b_cold = true;  // the family "odd"
  const nlohmann::json held_out = evaluate_cost_models(cold, "family", t, options, {}, {"odd"});
  EXPECT_EQ(held_out["runtime_fallbacks"], 15);
  EXPECT_DOUBLE_EQ(held_out["runtime"]["top1_regret_mean"].get<double>(),
                   held_out["default"]["top1_regret_mean"].get<double>());

  // A trained model survives its JSON round trip with the same scores.
  const auto model = LearnedCpuModel::train(training_set(problems, t), t, options);
  const auto back = LearnedCpuModel::from_json(model->to_json());
  const auto& p = problems[0];
  EXPECT_EQ(model->score(p.problem, p.configs, t), back->score(p.problem, p.configs, t));
  // A variant's score does not depend on which others it is ranked with (the forests' scales are the model's).
  // (A problem the records did not measure: a measured one's fastest is put first, ahead of whatever is ranked.)
  GemmProblem unmeasured = p.problem;
  unmeasured.b_cold = !unmeasured.b_cold;
  const std::vector<CpuGemmConfig> pair{p.configs[3], p.configs[1]};
  const auto all_scores = back->score(unmeasured, p.configs, t), pair_scores = back->score(unmeasured, pair, t);
  EXPECT_NEAR(pair_scores[0] - pair_scores[1], all_scores[3] - all_scores[1], 1e-9);
  EXPECT_GT(nlohmann::json::parse(model->to_json()).at("ranker_scale").get<double>(), 0);
  EXPECT_EQ(back->target(), t.str());
  // It ranks only for the ISA it was trained on: another target's kernels and caches are not its training's.
  EXPECT_TRUE(back->covers(p.problem, t));
  CpuTarget other_isa = t;
  other_isa.isa = CpuIsa::Avx2;
  EXPECT_FALSE(back->covers(p.problem, other_isa));
  // Nor for an AVX-512 core with another FMA rate, whose best register tiles differ.
  EXPECT_EQ(back->vector_fmas_per_cycle(), t.vector_fmas_per_cycle);
  CpuTarget other_rate = t;
  other_rate.vector_fmas_per_cycle = 3 - t.vector_fmas_per_cycle;
  EXPECT_FALSE(back->covers(p.problem, other_rate));
  nlohmann::json unrated = nlohmann::json::parse(model->to_json());
  unrated.erase("vector_fmas_per_cycle");  // a model from before the rate was recorded covers either
  EXPECT_TRUE(LearnedCpuModel::from_json(unrated.dump())->covers(p.problem, other_rate));
  unrated["vector_fmas_per_cycle"] = 7;
  EXPECT_THROW(LearnedCpuModel::from_json(unrated.dump()), InvalidArgument);
  // Found by fuzz_cost_model: a rate beyond int's range was converted (undefined behaviour) before it was checked.
  for (const char* rate : {"5.5e70", "1.5", "-1e300", "\"2\""}) {
    unrated["vector_fmas_per_cycle"] = nlohmann::json::parse(rate);
    EXPECT_THROW(LearnedCpuModel::from_json(unrated.dump()), InvalidArgument) << rate;
  }
  EXPECT_THROW(LearnedCpuModel::from_json("{}"), InvalidArgument);
  EXPECT_THROW(LearnedCpuModel::from_json("not json"), InvalidArgument);
  nlohmann::json other = nlohmann::json::parse(model->to_json());
  other["features"] = {"something", "else"};
  EXPECT_THROW(LearnedCpuModel::from_json(other.dump()), InvalidArgument);

  // A problem its records measured ranks their fastest first, whatever the forests think: here the table is told
  // the slowest is fastest, which no forest fitted to these times ranks first. Other problems are the forests'.
  TrainingSet told = training_set(problems, t);
  ASSERT_EQ(told.measured_best.size(), problems.size());
  EXPECT_EQ(told.measured_best[0].first, measured_problem_key(p.problem));
  const auto slowest = static_cast<std::size_t>(std::max_element(p.ns.begin(), p.ns.end()) - p.ns.begin());
  told.measured_best[0].second = p.configs[slowest];
  const auto remembering = LearnedCpuModel::from_json(LearnedCpuModel::train(told, t, options)->to_json());
  EXPECT_EQ(rank_by_score(remembering->score(p.problem, p.configs, t))[0], slowest);
  EXPECT_NE(rank_by_score(back->score(p.problem, p.configs, t))[0], slowest);
  GemmProblem colder = p.problem;
  colder.b_cold = !colder.b_cold;
  EXPECT_NE(measured_problem_key(colder), measured_problem_key(p.problem));
  EXPECT_EQ(remembering->score(colder, p.configs, t), back->score(colder, p.configs, t));
  nlohmann::json untabled = nlohmann::json::parse(remembering->to_json());
  untabled.erase("measured_best");  // models from before the table load without one
  EXPECT_NE(rank_by_score(LearnedCpuModel::from_json(untabled.dump())->score(p.problem, p.configs, t))[0], slowest);
}

// Problems timed on one and on two threads, where two threads' time is one thread's scaled by the grid planner's
// split and, beyond it, 40% longer for register tiles of 8 rows or more (a rule neither the one-thread records nor the
// planner show): a model trained on both thread counts ranks by the threads a problem runs on and learns that rule;
// one trained on the one-thread problems alone (ranked with the planner's split) does not.
TEST(LearnedModel, LearnsWhatThePlannerMissesOnTwoThreads) {
  const CpuTarget t = avx512();
  std::vector<RecordedProblem> problems = synthetic_problems(t, 30);
  const std::size_t one_thread = problems.size();
  int rule_decides = 0;  // problems whose fastest config the rule changes
  const auto fastest = [](const RecordedProblem& r) {
    return static_cast<std::size_t>(std::min_element(r.ns.begin(), r.ns.end()) - r.ns.begin());
  };
  for (std::size_t i = 0; i < one_thread; ++i) {
    problems[i].problem.threads = 1;
    RecordedProblem two = problems[i];
    two.problem.threads = 2;
    for (std::size_t j = 0; j < two.configs.size(); ++j)
      two.ns[j] *= split_share(two.problem, two.configs[j], 2) * (two.configs[j].mr >= 8 ? 1.4 : 1.0);
    rule_decides += two.configs[fastest(two)].mr != two.configs[fastest(problems[i])].mr;
    problems.push_back(std::move(two));
  }
  ASSERT_GE(rule_decides, 5) << "the rule must matter for the test to say anything";
  TrainingOptions options;
  options.rounds = 40;
  options.slowdown_rounds = 40;
  options.threads = 1;  // see LearnsARuleTheAnalyticModelLacksAndRoundTrips
  const auto trained = [&](std::vector<RecordedProblem> set) {
    // Without the table of measured bests, so that the forests answer.
    nlohmann::json document =
        nlohmann::json::parse(LearnedCpuModel::train(training_set(set, t), t, options)->to_json());
    document.erase("measured_best");
    return LearnedCpuModel::from_json(document.dump());
  };
  const auto both = trained(problems);
  const auto one = trained({problems.begin(), problems.begin() + static_cast<std::ptrdiff_t>(one_thread)});
  EXPECT_TRUE(both->ranks_threads());
  const auto features = nlohmann::json::parse(both->to_json()).at("features").get<std::vector<std::string>>();
  EXPECT_NE(std::find(features.begin(), features.end(), "log_split_share"), features.end());
  const auto regret_on_two = [&](const LearnedCpuModel& model) {
    double sum = 0;
    for (std::size_t i = one_thread; i < problems.size(); ++i) {
      const RecordedProblem& r = problems[i];
      const auto scores = score_on_threads(model, r.problem, r.problem, r.configs, t, 2);
      sum += r.ns[rank_by_score(scores)[0]] / r.ns[fastest(r)] - 1.0;
    }
    return sum / static_cast<double>(problems.size() - one_thread);
  };
  const double learned = regret_on_two(*both), planner_only = regret_on_two(*one);
  EXPECT_LT(learned, 0.05) << "one-thread model: " << planner_only;
  EXPECT_GT(planner_only, 2 * learned + 0.02)
      << "the rule is one the one-thread model cannot know; learned " << learned;
  // Two threads' measured best is not one thread's: the table keys them apart.
  GemmProblem two = problems[0].problem;
  two.threads = 2;
  EXPECT_NE(measured_problem_key(two), measured_problem_key(problems[0].problem));
}

// A model reads its features by name: one trained before features were added (the shipped AVX2 model, whose list
// lacks the thread features) still scores, and a feature this tessera does not compute is refused by name.
TEST(LearnedModel, ReadsTheFeaturesItWasTrainedOnByName) {
  const std::string& text = shipped_model_text("cpu:avx2");
  ASSERT_FALSE(text.empty());
  nlohmann::json document = nlohmann::json::parse(text);
  const auto features = document.at("features").get<std::vector<std::string>>();
  ASSERT_LT(features.size(), cpu_feature_names().size()) << "the shipped AVX2 model predates the thread features";
  const auto model = LearnedCpuModel::from_json(text);
  EXPECT_FALSE(model->ranks_threads());
  CpuTarget t = avx512();
  t.isa = CpuIsa::Avx2;
  const GemmProblem p = problem(203, 301, 407);  // no shape of the AVX2 records
  const auto space = cpu_variants(p, t);
  const auto scores = model->score(p, space, t);
  ASSERT_EQ(scores.size(), space.size());
  for (double s : scores) EXPECT_TRUE(std::isfinite(s));
  // Its scores are a function of its own features only: the thread features of the problem change nothing.
  GemmProblem on_two = p;
  on_two.threads = 2;
  EXPECT_EQ(model->score(on_two, space, t), scores);
  document["features"][0] = "log_m_squared";
  try {
    LearnedCpuModel::from_json(document.dump());
    ADD_FAILURE() << "an unknown feature was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("log_m_squared"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The runtime's choice: the shipped model (or a timed budget) inside its range, default_for outside, and always a
// correct result.
TEST(RuntimeChoice, CostModelsAndTuningBudgetComputeTheRightResult) {
  for (const char* model : {"default", "analytic", "heuristic"})
    for (int budget : {0, 3}) {
      RuntimeOptions options;
      options.threads = 1;
      options.cost_model = model;
      options.tuning_budget = budget;
      Runtime runtime(options);
      std::vector<float> a(37 * 53), b(53 * 41), d(37 * 41);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
      GemmArgs args;
      args.a = Tensor::matrix(a.data(), 37, 53);
      args.b = Tensor::matrix(b.data(), 53, 41);
      args.d = Tensor::matrix(d.data(), 37, 41);
      const GemmProblem p = describe_gemm(args);
      const CpuGemmConfig chosen = runtime.choose_config(p);
      const auto space = cpu_variants(p, runtime.target());
      EXPECT_NE(std::find(space.begin(), space.end(), chosen), space.end()) << model << " chose outside the space";
      if (std::string(model) == "heuristic") {
        EXPECT_EQ(chosen, CpuGemmConfig::default_for(p, runtime.target()));
      }
      EXPECT_EQ(runtime.choose_config(p), chosen) << "the choice is remembered per shape";
      const GemmReference reference = reference_gemm(args);
      runtime.gemm(args);
      EXPECT_TRUE(compare_gemm(reference, args.d, true).ok()) << model << " budget " << budget;
    }
  // A timed budget for a signature that is not the default: a C read through beta, a fused epilogue with tensors
  // indexed [n], [m] and [m,n] (the tuner's operands used to describe the default signature, and every such call
  // was refused).
  for (int threads : {1, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    options.tuning_budget = 2;
    Runtime runtime(options);
    const std::int64_t M = 37, N = 41, K = 53;
    std::vector<float> a(M * K), b(K * N), c(M * N), d(M * N), bias(N), scale(M), residual(M * N);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(static_cast<int>(i % 3) - 1);
    for (std::size_t i = 0; i < residual.size(); ++i) residual[i] = static_cast<float>(static_cast<int>(i % 4));
    for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(static_cast<int>(i % 9) - 4);
    for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = static_cast<float>(i % 2 + 1);
    GemmArgs args;
    args.a = Tensor::matrix(a.data(), M, K);
    args.b = Tensor::matrix(b.data(), K, N, Layout::col_major());
    args.c = Tensor::matrix(c.data(), M, N);
    args.d = Tensor::matrix(d.data(), M, N);
    args.beta = 0.5f;
    args.set_epilogue("relu(acc + bias[n]) + beta*c + scale[m]*residual[m,n]");
    args.inputs["bias"] = Tensor::vector(bias.data(), N);
    args.inputs["scale"] = Tensor::vector(scale.data(), M);
    args.inputs["residual"] = Tensor::matrix(residual.data(), M, N);
    const GemmReference reference = reference_gemm(args);
    ASSERT_NO_THROW(runtime.gemm(args)) << threads << " threads";
    EXPECT_TRUE(compare_gemm(reference, args.d, true).ok()) << threads << " threads";
  }
  // The shipped model was trained on f32 records only: bf16 problems are outside its range.
  Runtime runtime;
  GemmProblem p;
  p.m = p.n = p.k = 512;
  p.signature.a.dtype = p.signature.b.dtype = DType::bf16;
  p.signature.c = {DType::f32, Layout::zero()};
  if (runtime.target().avx512_bf16) {
    EXPECT_EQ(runtime.choose_config(p), CpuGemmConfig::default_for(p, runtime.target()));
  }
  // The choice says its path and the condition it was ranked for: a few rows times a B beyond L2 as B cold.
  GemmProblem skinny;
  skinny.m = 4, skinny.n = skinny.k = 2048;  // B 16 MiB
  skinny.signature.c = {DType::f32, Layout::zero()};
  const Runtime::GemmChoice cold = runtime.choice(skinny);
  EXPECT_TRUE(cold.b_cold);
  EXPECT_EQ(cold.config, runtime.choose_config(skinny));
  skinny.m = 512;
  EXPECT_FALSE(runtime.choice(skinny).b_cold);
  EXPECT_TRUE(runtime.choice(skinny).path == "rules" || runtime.choice(skinny).path.rfind("model:", 0) == 0)
      << runtime.choice(skinny).path;
  RuntimeOptions bad;
  bad.cost_model = "/nonexistent/model.json";
  EXPECT_THROW(Runtime{bad}, InvalidArgument);
  bad.cost_model = "default";
  bad.tuning_budget = -1;
  EXPECT_THROW(Runtime{bad}, InvalidArgument);
}

// A batch split over threads is ranked as each thread's share of it (what a core's caches hold, and what the
// single-thread records timed); a batch smaller than the threads, or a call on one thread, as it is.
TEST(RuntimeChoice, ABatchIsRankedAsEachThreadsShare) {
  std::vector<float> a(16 * 16 * 1024), b(16 * 16 * 1024), d(16 * 16 * 1024);
  const auto problem = [&](std::int64_t batch, int threads) {
    GemmArgs args;
    args.a = Tensor::batched(a.data(), batch, 16, 16, Layout::row_major(), 16, 256);
    args.b = Tensor::batched(b.data(), batch, 16, 16, Layout::row_major(), 16, 256);
    args.d = Tensor::batched(d.data(), batch, 16, 16, Layout::row_major(), 16, 256);
    args.threads = threads;
    return describe_gemm(args);
  };
  EXPECT_EQ(problem(8, 3).threads, 3) << "describe_gemm carries the call's threads";
  RuntimeOptions options;
  options.threads = 2;
  const auto fresh = [&](std::int64_t batch, int threads) {
    return Runtime(options).choose_config(problem(batch, threads));
  };
  Runtime runtime(options);
  EXPECT_EQ(runtime.choose_config(problem(1024, 2)), fresh(512, 1));
  EXPECT_EQ(runtime.choose_config(problem(1023, 2)), fresh(512, 1)) << "shares round up";
  EXPECT_EQ(runtime.choose_config(problem(1024, 0)), fresh(512, 1)) << "0 threads: the runtime's";
  EXPECT_EQ(runtime.choose_config(problem(1024, 8)), fresh(512, 1)) << "at most the runtime's threads";
  EXPECT_EQ(runtime.choose_config(problem(1024, 1)), fresh(1024, 1)) << "remembered per share, not per shape";
  EXPECT_EQ(runtime.choose_config(problem(1, 2)), fresh(1, 1)) << "one matrix is not split by the batch";
}

}  // namespace
}  // namespace tessera
