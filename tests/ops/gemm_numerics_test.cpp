// CPU GEMM numerics against the double-accumulated reference: layouts × edge shapes × alpha/beta × epilogues.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>

#include "generator/core/expr_eval.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "tessera/reference.hpp"
#include "tests/test_util.hpp"

namespace tessera {
namespace {

using test::Matrix;

const Layout kRow = Layout::row_major(), kCol = Layout::col_major();
const std::int64_t kEdgeSizes[] = {1, 2, 7, 15, 16, 17, 31, 33, 63, 65, 100, 127, 129, 255, 257};

struct Case {
  Case(std::int64_t m_, std::int64_t n_, std::int64_t k_, std::int64_t batch_ = 1)
      : m(m_), n(n_), k(k_), batch(batch_) {}
  std::int64_t m, n, k, batch;
  Layout la = kRow, lb = kRow, ld = kRow;
  std::string epilogue;  // empty: alpha*acc + beta*c
  float alpha = 1, beta = 1;
  bool integers = true;  // small-integer inputs, exact comparison
  int threads = 0;
  bool batched = false;  // 3-D operands even when batch == 1
  // Padding past each row (column) and matrix of A, B, C, D: never minimal strides by accident, unless set to 0.
  std::int64_t pad_a = 3, pad_b = 5, pad_c = 2, pad_d = 1;

  std::string describe() const {
    return fmt::format("{}x{}x{} batch {} layouts {}{}{} alpha {} beta {} epilogue '{}'", m, n, k, batch, la.name()[0],
                       lb.name()[0], ld.name()[0], alpha, beta, epilogue);
  }
};

// Owns every buffer of a case; D starts as NaN so unwritten outputs show.
struct Operands {
  Matrix a, b, c, d;
  std::map<std::string, Matrix> inputs;
  GemmArgs args;

  explicit Operands(const Case& t, std::uint32_t seed)
      : a(t.batch, t.m, t.k, t.la, t.pad_a, t.batched),
        b(t.batch, t.k, t.n, t.lb, t.pad_b, t.batched),
        c(t.batch, t.m, t.n, t.ld, t.pad_c, t.batched),
        d(t.batch, t.m, t.n, t.ld, t.pad_d, t.batched) {
    std::mt19937 rng(seed);
    for (Matrix* x : {&a, &b, &c}) t.integers ? x->fill_integers(rng) : x->fill_uniform(rng);
    if (!t.epilogue.empty()) args.epilogue = Epilogue::parse(t.epilogue);
    for (const auto& in : args.epilogue.tensors()) {
      // Vectors are 1×N / M×1 matrices viewed as 1-D; matrices follow D's layout.
      const bool vector = in.form != IndexForm::MN;
      const std::int64_t rows = in.form == IndexForm::N ? 1 : t.m, cols = in.form == IndexForm::M ? 1 : t.n;
      Matrix& x =
          inputs.try_emplace(in.name, vector ? 1 : t.batch, rows, cols, vector ? kRow : t.ld, 1, !vector && t.batched)
              .first->second;
      t.integers ? x.fill_integers(rng) : x.fill_uniform(rng);
      if (vector) {
        const std::int64_t len = in.form == IndexForm::N ? t.n : t.m;
        const std::int64_t stride = in.form == IndexForm::N ? 1 : x.view.strides[0];
        args.inputs[in.name] = Tensor::vector(x.storage.data(), len, stride);
      } else {
        args.inputs[in.name] = x.view;
      }
    }
    args.a = a.view;
    args.b = b.view;
    args.c = c.view;
    args.d = d.view;
    args.alpha = t.alpha;
    args.beta = t.beta;
    args.threads = t.threads;
  }
};

std::int64_t written(const Matrix& d) {
  std::int64_t count = 0;
  for (float x : d.storage) count += !std::isnan(x);
  return count;
}

void check_case(Runtime& runtime, const Case& t, std::uint32_t seed = 1) {
  SCOPED_TRACE(t.describe());
  Operands ops(t, seed);
  const GemmReference ref = reference_gemm(ops.args);
  runtime.gemm(ops.args);
  const Comparison cmp = compare_gemm(ref, ops.d.view, t.integers);
  EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
  // Every output written, nothing outside it (D's padding is NaN).
  EXPECT_EQ(written(ops.d), t.batch * t.m * t.n);
}

// Shapes where each of M, N, K walks the edge list against the others.
std::vector<std::array<std::int64_t, 3>> edge_shapes() {
  std::vector<std::array<std::int64_t, 3>> shapes;
  const std::size_t n = std::size(kEdgeSizes);
  for (std::size_t i = 0; i < n; ++i) {
    shapes.push_back({kEdgeSizes[i], kEdgeSizes[(i + 4) % n], kEdgeSizes[(i + 9) % n]});
    shapes.push_back({kEdgeSizes[(i + 9) % n], kEdgeSizes[i], kEdgeSizes[(i + 4) % n]});
    shapes.push_back({kEdgeSizes[(i + 4) % n], kEdgeSizes[(i + 9) % n], kEdgeSizes[i]});
  }
  return shapes;
}

class LayoutCombination : public ::testing::TestWithParam<std::tuple<Layout, Layout, Layout>> {};

TEST_P(LayoutCombination, EdgeShapesAreExact) {
  static Runtime runtime;
  const auto [la, lb, ld] = GetParam();
  int i = 0;
  for (const auto& [m, n, k] : edge_shapes()) {
    Case t{m, n, k};
    t.la = la;
    t.lb = lb;
    t.ld = ld;
    // Alternate: C read with beta = 1, or beta = 0 with C full of NaN that must not leak.
    if (i++ % 2) {
      t.alpha = 2;
      t.beta = 0;
    }
    if (t.beta == 0) {
      Operands ops(t, 7);
      ops.c.fill(std::numeric_limits<float>::quiet_NaN());
      const GemmReference ref = reference_gemm(ops.args);
      runtime.gemm(ops.args);
      const Comparison cmp = compare_gemm(ref, ops.d.view, true);
      EXPECT_TRUE(cmp.ok()) << t.describe() << ": " << cmp.first_mismatch;
      EXPECT_EQ(written(ops.d), m * n) << t.describe();
    } else {
      check_case(runtime, t);
    }
  }
}

TEST_P(LayoutCombination, KSmallerThanTheRegisterTileAndZero) {
  static Runtime runtime;
  const auto [la, lb, ld] = GetParam();
  for (std::int64_t k : {0, 1, 2, 3, 5}) {
    Case t{37, 45, k};
    t.la = la;
    t.lb = lb;
    t.ld = ld;
    t.beta = 2;
    check_case(runtime, t);
  }
}

std::string layout_case_name(const ::testing::TestParamInfo<std::tuple<Layout, Layout, Layout>>& param_info) {
  const auto& [la, lb, ld] = param_info.param;
  return fmt::format("a{}_b{}_d{}", la.name(), lb.name(), ld.name());
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, LayoutCombination,
                         ::testing::Combine(::testing::Values(kRow, kCol), ::testing::Values(kRow, kCol),
                                            ::testing::Values(kRow, kCol)),
                         layout_case_name);

// Vectors of B per register tile row: `wanted`, or fewer where MR rows of that many accumulators would not fit the
// target's registers (with a vector of B each and a broadcast of A).
int vectors_fitting(int mr, int wanted, const CpuTarget& target) {
  int v = wanted;
  while (v > 1 && mr * v + v + 1 > target.vector_registers()) --v;
  return v;
}

// Every combination of packing, over layouts and edge shapes, through an explicit config.
TEST(GemmNumerics, PackingVariantsAreExact) {
  Runtime runtime;
  const CpuTarget& target = runtime.target();
  int i = 0;
  for (bool pack_a : {false, true})
    for (bool pack_b : {false, true})
      for (Layout la : {kRow, kCol})
        for (Layout lb : {kRow, kCol}) {
          if (!pack_b && lb == kCol) continue;  // unpacked B needs row-major B (validate says so)
          for (const auto& [m, n, k] : edge_shapes()) {
            if (i++ % 5) continue;
            Case t{m, n, k};
            t.la = la;
            t.lb = lb;
            t.ld = (i % 2) ? kRow : kCol;
            SCOPED_TRACE(fmt::format("{} pack_a {} pack_b {}", t.describe(), pack_a, pack_b));
            Operands ops(t, 3);
            GemmProblem problem = runtime.describe(ops.args);
            CpuGemmConfig config = CpuGemmConfig::default_for(problem, target).untransposed();
            config.dot = false;  // the packing kernels, also where default_for picks a dot kernel
            config.pack_a = pack_a;
            config.pack_b = pack_b;
            config.kc = 64;  // several K slabs even for these sizes
            // Row-major A packs by transposing blocks of 8 rows: slivers of fewer, as many and more rows.
            if (!config.fixed()) {
              config.mr = std::array{8, 6, 12}[static_cast<std::size_t>(i % 3)];
              config.nr = vectors_fitting(config.mr, 2, target) * target.vector_lanes();
              config.nc = 4 * config.nr;
              config.mc = 96;
            }
            const GemmReference ref = reference_gemm(ops.args);
            runtime.compile(problem, config).run(ops.args);
            const Comparison cmp = compare_gemm(ref, ops.d.view, true);
            EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch;
            EXPECT_EQ(written(ops.d), m * n);
          }
        }
}

// A fixed-size kernel for the product as it is (not transposed) with default_for's tile: B read in place, or
// packed when column-major.
CpuGemmConfig direct_fixed_config(const GemmProblem& p, const CpuTarget& target) {
  CpuGemmConfig c = CpuGemmConfig::default_for(p, target).untransposed();
  c.dot = false;
  c.fixed_m = static_cast<int>(p.m), c.fixed_n = static_cast<int>(p.n), c.fixed_k = static_cast<int>(p.k);
  c.kc = std::max(c.fixed_k, 1);
  c.mc = (c.fixed_m + c.mr - 1) / c.mr * c.mr;
  c.nc = (c.fixed_n + c.nr - 1) / c.nr * c.nr;
  c.pack_a = false;
  c.pack_b = p.signature.b.layout.kind() == LayoutKind::ColMajor;
  return c;
}

// Fixed kernels run whole matrices or, one matrix on two threads (at least 200k multiply-adds: the first three
// shapes), halves of its rows (whole MR tiles first, the edge tile in the second): register tiles of several
// heights, halves of full tiles, of edge tiles, batches, one and two threads.
TEST(GemmNumerics, FixedKernelHalvesAreExact) {
  Runtime runtime;
  const CpuTarget& target = runtime.target();
  const std::array<std::int64_t, 4> shapes[] = {{64, 64, 64, 1}, {60, 64, 64, 1}, {50, 64, 64, 1}, {64, 60, 61, 3},
                                                {60, 33, 17, 2}, {17, 64, 64, 8}, {16, 16, 16, 1}, {9, 40, 64, 2},
                                                {23, 64, 1, 1},  {1, 7, 3, 2}};
  int i = 0;
  for (const auto& [m, n, k, batch] : shapes)
    for (int mr : {4, 6, 8, target.vector_registers() >= 32 ? 16 : 12})
      for (int threads : {1, 2}) {
        Case t{m, n, k, batch};
        t.threads = threads;
        t.ld = i % 3 ? kRow : kCol;
        t.lb = i++ % 4 == 3 ? kCol : kRow;  // a column-major B is packed whole per matrix
        Operands ops(t, 7);
        const GemmProblem problem = runtime.describe(ops.args);
        CpuGemmConfig config = direct_fixed_config(problem, target);
        config.mr = mr;
        config.nr = vectors_fitting(mr, mr >= 12 ? 1 : 2, target) * target.vector_lanes();
        config.mc = static_cast<int>((m + mr - 1) / mr * mr);
        config.nc = static_cast<int>((n + config.nr - 1) / config.nr * config.nr);
        SCOPED_TRACE(fmt::format("{} mr {} threads {} halves {}", t.describe(), mr, threads, config.fixed_row_parts()));
        const GemmReference ref = reference_gemm(ops.args);
        runtime.compile(problem, config).run(ops.args);
        const Comparison cmp = compare_gemm(ref, ops.d.view, true);
        EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
        EXPECT_EQ(written(ops.d), batch * m * n);
      }
}

// Fixed kernels have a copy for contiguous matrices, their leading dimensions compiled in, taken only when A, B, D
// and (when read) C all are: every operand contiguous, then each one padded alone (the others contiguous), so that
// a check that missed one would store or read with the wrong leading dimension; C read or not, A row- or
// column-major, B row-major (read in place) or column-major (packed), D row- or column-major, one and two threads.
TEST(GemmNumerics, FixedKernelsOnContiguousMatricesAreExact) {
  Runtime runtime;
  const CpuTarget& target = runtime.target();
  // B's layout alternates by shape: the last, 40×20×36, packs a column-major B in whole 16×16 blocks, a K tail,
  // an N tail and their corner.
  const std::array<std::int64_t, 4> shapes[] = {{16, 16, 16, 4}, {32, 32, 32, 3}, {17, 40, 9, 2},
                                                {64, 64, 64, 2}, {24, 20, 36, 3}, {40, 20, 36, 2}};
  int i = 0;
  for (const auto& [m, n, k, batch] : shapes)
    for (int padded = -1; padded < 4; ++padded) {
      Case t{m, n, k, batch};
      t.pad_a = t.pad_b = t.pad_c = t.pad_d = 0;
      std::int64_t* pads[] = {&t.pad_a, &t.pad_b, &t.pad_c, &t.pad_d};
      if (padded >= 0) *pads[padded] = 1;
      t.beta = padded == 2 || i % 2 ? 0.5f : 0;
      t.la = i % 3 ? kRow : kCol;
      t.lb = i / 5 % 2 ? kCol : kRow;  // every padding, of each layout
      t.ld = i % 4 == 1 ? kCol : kRow;
      t.threads = 1 + i % 2;
      ++i;
      Operands ops(t, 11);
      const GemmProblem problem = runtime.describe(ops.args);
      const CpuGemmConfig config = direct_fixed_config(problem, target);
      SCOPED_TRACE(
          fmt::format("{} padded operand {} threads {}", t.describe(), "ABCD-"[padded < 0 ? 4 : padded], t.threads));
      const GemmReference ref = reference_gemm(ops.args);
      runtime.compile(problem, config).run(ops.args);
      const Comparison cmp = compare_gemm(ref, ops.d.view, true);
      EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
    }
}

// Dot kernels (A·Bᵀ, K along the vector lanes): every tile of the variant space, one and several K slabs with a
// masked K tail, rows and columns past the tile edges, batches, two threads, an epilogue with a bias, against the
// reference.
TEST(GemmNumerics, DotKernelsAreExact) {
  Runtime runtime;
  const CpuTarget& target = runtime.target();
  int i = 0;
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
           {1, 70, 300}, {7, 33, 17}, {13, 100, 129}, {64, 31, 1000}, {5, 1, 0}, {40, 257, 33}}) {
    for (auto [mr, nr] : {std::pair{1, 8}, {2, 8}, {3, 8}, {4, 4}, {4, 6}, {5, 5}}) {
      if (mr * nr + mr + 1 > target.vector_registers()) continue;  // not in this target's space (AVX2: 16 registers)
      Case t{m, n, k, 1 + i % 3};
      t.lb = kCol;
      t.ld = i % 2 ? kRow : kCol;
      t.threads = 1 + i % 2;
      t.beta = i % 2 ? 0.5f : 0;
      if (i % 4 == 3) t.epilogue = "relu(alpha*acc + bias[n])";
      ++i;
      SCOPED_TRACE(fmt::format("{} dot {}x{}", t.describe(), mr, nr));
      Operands ops(t, 7);
      const GemmProblem problem = runtime.describe(ops.args);
      ASSERT_TRUE(dot_kernel_fits(problem));
      CpuGemmConfig config = CpuGemmConfig::default_for(problem, target).untransposed();
      config.dot = true;
      config.pack_a = config.pack_b = false;
      config.fixed_m = config.fixed_n = config.fixed_k = 0;
      config.mr = mr, config.nr = nr;
      config.kc = i % 3 == 0 ? 4096 : 64;  // one slab, or many
      config.mc = 2 * mr;                  // several macro-tiles down M
      config.nc = 4 * nr;                  // and across N
      const GemmReference ref = reference_gemm(ops.args);
      runtime.compile(problem, config).run(ops.args);
      const Comparison cmp = compare_gemm(ref, ops.d.view, true);
      EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
      EXPECT_EQ(written(ops.d), t.batch * m * n);
    }
  }
}

// Transposed kernels (Dᵀ = Bᵀ·Aᵀ) over every layout of A, B and D: register tiles of 1-4 vectors, several K slabs
// and macro-tiles, batches, one and two threads, C with beta, and epilogue tensors indexed [n], [m] and [m,n] (which
// swap roles in the transposed product), against the reference.
TEST(GemmNumerics, TransposedKernelsAreExact) {
  Runtime runtime;
  const CpuTarget& target = runtime.target();
  const int lanes = target.vector_lanes();
  const char* epilogues[] = {"", "relu(alpha*acc + bias[n])", "acc*scale[m] - residual[m,n]", "alpha*acc + beta*c"};
  int i = 0;
  for (Layout la : {kRow, kCol})
    for (Layout lb : {kRow, kCol})
      for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
               {13, 300, 70}, {64, 129, 33}, {1, 40, 5}, {37, 17, 200}, {100, 1, 9}, {20, 64, 0}}) {
        for (int vectors = 1; vectors <= (lanes == 16 ? 4 : 2); ++vectors) {
          Case t{m, n, k, 1 + i % 2};
          t.la = la;
          t.lb = lb;
          t.ld = i % 3 ? kRow : kCol;
          t.threads = 1 + i / 2 % 2;
          t.epilogue = epilogues[i % 4];
          t.alpha = 2;
          t.beta = i % 4 == 3 ? 0.5f : 0;
          ++i;
          Operands ops(t, 11);
          const GemmProblem problem = runtime.describe(ops.args);
          CpuGemmConfig config = CpuGemmConfig::default_for(transposed(problem), target).untransposed();
          config.transpose = true;
          config.dot = false;
          config.fixed_m = config.fixed_n = config.fixed_k = 0;
          config.pack_a = false;
          config.pack_b = true;  // Aᵀ is column-major for a row-major A: packed
          config.nr = vectors * lanes;
          config.mr = std::min(8, (target.vector_registers() - 1) / vectors - 1);
          config.kc = 32;             // several K slabs
          config.mc = 2 * config.mr;  // several macro-tiles down N
          config.nc = config.nr;      // and across M
          SCOPED_TRACE(fmt::format("{} transposed {}x{}", t.describe(), config.mr, config.nr));
          const GemmReference ref = reference_gemm(ops.args);
          runtime.compile(problem, config).run(ops.args);
          const Comparison cmp = compare_gemm(ref, ops.d.view, true);
          EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
          EXPECT_EQ(written(ops.d), t.batch * m * n);
        }
      }
}

// A column-major D is stored by columns: each chunk of at most 8 tile rows is turned into columns of 4 (up to 4
// rows) or 8 values by staged shuffles. Every tile height from 1 to 16 (one chunk, a chunk and a part, two), every
// vector count, edge rows and columns, a parked (transcendental) epilogue and a cheap one, AVX-512 and AVX2.
TEST(GemmNumerics, ColumnMajorDAtEveryTileHeight) {
  std::vector<std::string> targets;
  if (CpuTarget::host_supports(CpuIsa::Avx512)) targets.push_back("cpu:avx512");
  if (CpuTarget::host_supports(CpuIsa::Avx2)) targets.push_back("cpu:avx2");
  if (targets.empty()) GTEST_SKIP() << "host has neither AVX-512 nor AVX2";
  int i = 0;
  for (const std::string& name : targets) {
    Runtime runtime({name, 0, 0});
    const CpuTarget& target = runtime.target();
    const int lanes = target.vector_lanes();
    for (int mr = 1; mr <= 16; ++mr)
      for (int vectors = 1; vectors <= 4; ++vectors) {
        if (mr * vectors + vectors + 1 > target.vector_registers()) continue;
        Case t{2 * mr + 1 + i % 3, vectors * lanes + 5 + i % 7, 9};
        t.ld = kCol;
        t.alpha = 2;
        t.beta = i % 2 ? 0.5f : 0;
        t.epilogue = i % 3 == 0 ? "gelu(alpha*acc + bias[n])" : "";
        t.integers = t.epilogue.empty();
        ++i;
        Operands ops(t, 5);
        const GemmProblem problem = runtime.describe(ops.args);
        CpuGemmConfig config = CpuGemmConfig::default_for(problem, target).untransposed();
        config.dot = false;
        config.fixed_m = config.fixed_n = config.fixed_k = 0;
        config.pack_a = false;
        config.pack_b = true;
        config.mr = mr;
        config.nr = vectors * lanes;
        config.kc = 8;  // two K slabs
        config.mc = 2 * mr;
        config.nc = config.nr;
        SCOPED_TRACE(fmt::format("{} on {}, tile {}x{}", t.describe(), name, mr, config.nr));
        const GemmReference ref = reference_gemm(ops.args);
        runtime.compile(problem, config).run(ops.args);
        const Comparison cmp = compare_gemm(ref, ops.d.view, t.integers);
        EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
        EXPECT_EQ(written(ops.d), t.batch * t.m * t.n);
      }
  }
}

// B read in place starts its full micro-tiles on a vector boundary of B's rows, behind a narrow first tile; edge
// tiles run kernels narrowed to the vectors they need. Every alignment of B's first element (its row stride a
// multiple of the vector or not), several K slabs and macro-tiles, one and two threads, against the reference.
TEST(GemmNumerics, InPlaceBAtEveryAlignment) {
  Runtime runtime;
  const CpuTarget& target = runtime.target();
  const int lanes = target.vector_lanes();
  struct Shape {
    std::int64_t m, n, k;
    const char* config;  // overrides of default_for's in-place config ("" for the default itself)
  };
  // Wide tiles of as many vectors as the target's registers hold (AVX-512 32, AVX2 16).
  const bool avx512 = target.vector_registers() >= 32;
  const Shape shapes[] = {{1, 1000, 70, ""},
                          {2, 517, 41, ""},
                          {5, 777, 33, ""},
                          {7, 1000, 37, ""},  // AVX2: two 4×24 tiles, the second clamped, K in three slabs
                          {8, 4100, 20, ""},  // wider than one N-wide panel
                          {1, 300, 50, "nr=32,kc=8,nc=320"},
                          {3, 1000, 37, avx512 ? "mr=2,nr=160,kc=16,nc=480" : "mr=2,nr=40,kc=16,nc=480"},
                          {9, 700, 20, avx512 ? "mr=4,nr=64,kc=8,nc=256,mc=8" : "mr=4,nr=24,kc=8,nc=240,mc=8"},
                          {1, 33, 9, "nr=16,kc=4"}};
  for (const Shape& s : shapes)
    for (std::int64_t ldb : {(s.n + lanes - 1) / lanes * lanes, (s.n + lanes - 1) / lanes * lanes + lanes, s.n + 3})
      for (int offset = 0; offset <= lanes; ++offset) {
        std::vector<float> b_store(static_cast<std::size_t>(offset + s.k * ldb + 8),
                                   std::numeric_limits<float>::quiet_NaN());
        Matrix a(1, s.m, s.k, kRow, 1), d(1, s.m, s.n, kRow, 2);
        std::mt19937 rng(static_cast<std::uint32_t>(offset * 31 + ldb));
        a.fill_integers(rng);
        std::uniform_int_distribution<int> dist(-3, 3);
        for (std::int64_t r = 0; r < s.k; ++r)
          for (std::int64_t c = 0; c < s.n; ++c)
            b_store[static_cast<std::size_t>(offset + r * ldb + c)] = static_cast<float>(dist(rng));
        GemmArgs g;
        g.a = a.view;
        g.b = Tensor::matrix(b_store.data() + offset, s.k, s.n, kRow, ldb);
        g.d = d.view;
        g.threads = 1 + offset % 2;
        SCOPED_TRACE(
            fmt::format("{}x{}x{} '{}' ldb {} offset {} threads {}", s.m, s.n, s.k, s.config, ldb, offset, g.threads));
        const GemmProblem problem = runtime.describe(g);
        CpuGemmConfig config = CpuGemmConfig::default_for(problem, target).with_overrides(s.config);
        config.pack_b = false;
        config.fixed_m = config.fixed_n = config.fixed_k = 0;
        const GemmReference ref = reference_gemm(g);
        runtime.compile(problem, config).run(g);
        const Comparison cmp = compare_gemm(ref, d.view, true);
        ASSERT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
        ASSERT_EQ(written(d), s.m * s.n);
      }
}

TEST(GemmNumerics, SeveralKSlabsAndMacroTiles) {
  Runtime runtime;
  // K beyond KC (partial sums through the workspace), M beyond MC, N beyond NC.
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
           {130, 70, 600}, {20, 600, 1031}, {300, 1100, 300}, {1, 1, 2000}, {257, 513, 577}}) {
    for (Layout la : {kRow, kCol}) {
      Case t{m, n, k};
      t.la = la;
      t.lb = la.transposed();
      t.alpha = -1;
      t.beta = 3;
      check_case(runtime, t);
    }
  }
}

TEST(GemmNumerics, EpiloguesAgainstTheReference) {
  Runtime runtime;
  const char* epilogues[] = {
      "relu(acc + bias[n])",
      "gelu(alpha*acc + bias[n])",
      "gelu_tanh(acc)*scale[m]",
      "silu(alpha*acc + beta*c)",
      "sigmoid(acc - residual[m,n])",
      "tanh(acc/4) + c",
      "exp(acc/8)",
      "abs(acc) - min(acc, bias[n]) + max(acc, scale[m])",
      "clamp(alpha*acc, -0.5, 0.75) + residual[m,n]*scale[m]",
      "acc",
      "2.5",
      "beta*c",
  };
  int i = 0;
  for (const char* e : epilogues) {
    for (Layout ld : {kRow, kCol}) {
      Case t{61 + i % 5, 47 + 3 * (i % 4), 33 + 11 * (i % 3)};
      t.epilogue = e;
      t.ld = ld;
      t.la = i % 2 ? kCol : kRow;
      t.alpha = 1.5;
      t.beta = 0.5;
      t.integers = false;
      check_case(runtime, t, static_cast<std::uint32_t>(i));
      ++i;
    }
  }
}

TEST(GemmNumerics, IntegerEpiloguesAreExact) {
  Runtime runtime;
  for (const char* e : {"relu(acc + bias[n])", "acc*scale[m] - residual[m,n]", "max(acc, 0) + beta*c"}) {
    Case t{67, 45, 29};
    t.epilogue = e;
    t.beta = 2;
    check_case(runtime, t);
  }
}

// The vectorised exp/tanh/erf of the CPU back-end against libm over the range that matters.
TEST(GemmNumerics, VectorMathMatchesLibm) {
  Runtime runtime;
  const std::int64_t n = 4001;
  std::vector<float> ones(1, 1.0f), xs(n), out(n);
  for (std::int64_t j = 0; j < n; ++j)
    xs[static_cast<std::size_t>(j)] = -20.0f + 40.0f * static_cast<float>(j) / (n - 1);
  for (const char* e : {"exp(acc)", "tanh(acc)", "sigmoid(acc)", "silu(acc)", "gelu(acc)", "gelu_tanh(acc)"}) {
    GemmArgs g;
    g.a = Tensor::matrix(ones.data(), 1, 1);
    g.b = Tensor::matrix(xs.data(), 1, n);
    g.d = Tensor::matrix(out.data(), 1, n);
    g.set_epilogue(e);
    runtime.gemm(g);
    const Epilogue ep = g.epilogue;
    double worst = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = xs[static_cast<std::size_t>(j)];
      const double want = evaluate(ep.tree(), [&](const ExprNode&) { return x; });
      const double err = std::fabs(out[static_cast<std::size_t>(j)] - want);
      const double allowed = 4e-7 * std::fabs(want) + 2e-7 * std::max(1.0, std::fabs(x));
      worst = std::max(worst, err / allowed);
      EXPECT_LE(err, allowed) << e << " at x = " << x << ": got " << out[static_cast<std::size_t>(j)] << ", want "
                              << want;
    }
    RecordProperty(std::string("worst_error_ratio_") + e, std::to_string(worst));
  }
  // Saturation: exp overflows to inf and underflows to 0 like libm.
  std::vector<float> extremes{100.0f, -110.0f, 88.0f, -87.0f};
  std::vector<float> got(4);
  GemmArgs g;
  g.a = Tensor::matrix(ones.data(), 1, 1);
  g.b = Tensor::matrix(extremes.data(), 1, 4);
  g.d = Tensor::matrix(got.data(), 1, 4);
  g.set_epilogue("exp(acc)");
  runtime.gemm(g);
  EXPECT_TRUE(std::isinf(got[0]) && got[0] > 0);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_NEAR(got[2], std::exp(88.0), std::exp(88.0) * 1e-6);
  EXPECT_NEAR(got[3], std::exp(-87.0), std::exp(-87.0) * 1e-6);
}

TEST(GemmNumerics, StridedBatchesAndBroadcasts) {
  Runtime runtime;
  Case t{33, 65, 17, 3};
  t.batched = true;
  check_case(runtime, t);
  t.la = kCol;
  t.epilogue = "relu(acc + bias[n]) + residual[m,n]";
  check_case(runtime, t);

  // B shared by every batch (2-D) while A and D are batched.
  Matrix a(4, 20, 9, kRow, 2, true), b(1, 9, 31, kCol, 1), d(4, 20, 31, kRow, 1, true);
  std::mt19937 rng(3);
  a.fill_integers(rng);
  b.fill_integers(rng);
  GemmArgs g;
  g.a = a.view;
  g.b = b.view;
  g.d = d.view;
  const GemmReference ref = reference_gemm(g);
  runtime.gemm(g);
  EXPECT_TRUE(compare_gemm(ref, d.view, true).ok());

  // An empty batch is a no-op.
  Matrix a0(0, 8, 8, kRow, 0, true), b0(0, 8, 8, kRow, 0, true), d0(0, 8, 8, kRow, 0, true);
  g.a = a0.view;
  g.b = b0.view;
  g.d = d0.view;
  EXPECT_NO_THROW(runtime.gemm(g));
}

TEST(GemmNumerics, GeneralStridesUseGathers) {
  Runtime runtime;
  // A and B as every other column of a larger matrix (neither stride is 1); vectors with strides.
  std::vector<float> a_store(40 * 2 * 30), b_store(30 * 3 * 50), bias(50 * 2), scale(40 * 3), out(40 * 50);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(-3, 3);
  for (auto* v : {&a_store, &b_store, &bias, &scale})
    for (auto& x : *v) x = static_cast<float>(dist(rng));
  GemmArgs g;
  g.a = {a_store.data(), DType::f32, {40, 30}, {60, 2}};
  g.b = {b_store.data(), DType::f32, {30, 50}, {3, 90}};
  g.d = Tensor::matrix(out.data(), 40, 50);
  g.set_epilogue("acc*scale[m] + bias[n]");
  g.inputs["bias"] = Tensor::vector(bias.data(), 50, 2);
  g.inputs["scale"] = Tensor::vector(scale.data(), 40, 3);
  const GemmProblem p = runtime.describe(g);
  EXPECT_EQ(p.signature.a.layout, Layout::strided());
  EXPECT_EQ(p.signature.b.layout, Layout::strided());
  const GemmReference ref = reference_gemm(g);
  runtime.gemm(g);
  const Comparison cmp = compare_gemm(ref, g.d, true);
  EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch;
}

TEST(GemmNumerics, InPlaceWithCAsD) {
  Runtime runtime;
  Matrix a(1, 50, 20, kRow), b(1, 20, 70, kRow), cd(1, 50, 70, kCol);
  std::mt19937 rng(5);
  a.fill_integers(rng);
  b.fill_integers(rng);
  cd.fill_integers(rng);
  GemmArgs g;
  g.a = a.view;
  g.b = b.view;
  g.c = cd.view;
  g.d = cd.view;
  g.beta = -1;
  const GemmReference ref = reference_gemm(g);
  runtime.gemm(g);
  EXPECT_TRUE(compare_gemm(ref, cd.view, true).ok());
}

// A prepared call runs the same multiplication again on whatever the buffers hold now.
TEST(GemmNumerics, PreparedCallsSeeNewBufferContents) {
  Runtime runtime;
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{16, 16, 16}, {100, 70, 300}}) {
    Case t{m, n, k};
    t.epilogue = "relu(acc + bias[n])";
    Operands ops(t, 21);
    const PreparedGemm call = runtime.compile(runtime.describe(ops.args)).prepare(ops.args);
    for (int round = 0; round < 3; ++round) {
      std::mt19937 rng(static_cast<std::uint32_t>(round));
      ops.a.fill_integers(rng);
      ops.inputs.at("bias").fill_integers(rng);
      const GemmReference ref = reference_gemm(ops.args);
      call.run();
      const Comparison cmp = compare_gemm(ref, ops.d.view, true);
      EXPECT_TRUE(cmp.ok()) << t.describe() << " round " << round << ": " << cmp.first_mismatch;
    }
  }
}

TEST(GemmNumerics, ThreadCountDoesNotChangeResults) {
  Runtime runtime({"cpu", 2, 0});
  Case t{300, 700, 300};
  t.integers = false;
  t.epilogue = "gelu(acc + bias[n])";
  Operands one(t, 9), two(t, 9);
  one.args.threads = 1;
  two.args.threads = 2;
  runtime.gemm(one.args);
  runtime.gemm(two.args);
  EXPECT_EQ(std::memcmp(one.d.storage.data(), two.d.storage.data(), one.d.storage.size() * sizeof(float)), 0)
      << "NaN padding compares equal bitwise too";
  // Workers left where the scheduler puts them compute the same.
  RuntimeOptions unpinned{"cpu", 2, 0};
  unpinned.pin_workers = false;
  Runtime free_runtime(unpinned);
  Operands three(t, 9);
  three.args.threads = 2;
  free_runtime.gemm(three.args);
  EXPECT_EQ(std::memcmp(one.d.storage.data(), three.d.storage.data(), one.d.storage.size() * sizeof(float)), 0);
}

TEST(GemmNumerics, Avx2PathMatchesTheReference) {
  if (!CpuTarget::host_supports(CpuIsa::Avx2)) GTEST_SKIP() << "host has no AVX2";
  Runtime runtime({"cpu:avx2", 0, 0});
  EXPECT_EQ(runtime.target().str(), "cpu:avx2");
  int i = 0;
  for (const auto& [m, n, k] : edge_shapes()) {
    if (i++ % 3) continue;
    for (Layout la : {kRow, kCol}) {
      Case t{m, n, k};
      t.la = la;
      t.lb = la.transposed();
      t.ld = la;
      check_case(runtime, t);
    }
  }
  Case t{77, 51, 300};
  t.epilogue = "gelu(alpha*acc + bias[n]) + residual[m,n]";
  t.integers = false;
  check_case(runtime, t);
}

// default_for's rules for AVX-512 cores with two full-width FMA units, one shape per branch (their caches those of
// the core they were fitted on), compiled and run on this host whatever its FMA units: the register tile each rule
// promises, and exact results on one and two threads.
TEST(GemmNumerics, TwoUnitDefaultConfigsAreExact) {
  if (!CpuTarget::host_supports(CpuIsa::Avx512)) GTEST_SKIP() << "host has no AVX-512";
  Runtime runtime({"cpu:avx512", 0, 0});
  CpuTarget two_units = runtime.target();
  two_units.vector_fmas_per_cycle = 2;
  two_units.l1d_bytes = 48 << 10;
  two_units.l2_bytes = 2 << 20;
  struct Expected {
    std::int64_t m, n, k;
    int mr, nr, kc;
    bool pack_b;
  };
  const Expected cases[] = {
      {2, 300, 200, 2, 64, 128, false},   // B in L2, two rows: in place, 4 vectors
      {1, 700, 900, 1, 64, 8, false},     // B beyond L2, one row: streamed in short slabs
      {3, 200, 300, 4, 64, 384, false},   // 3-4 rows in L2: 4×64
      {13, 333, 257, 8, 48, 384, false},  // 8×48 pads 13 rows least
      {5, 1100, 600, 6, 64, 16, false},   // B beyond L2, few rows: streamed
      {10, 1030, 600, 12, 32, 16, false},
      {40, 1030, 600, 8, 48, 64, false},  // 33-64 rows, B beyond L2: short slabs in place
      {100, 40, 300, 8, 48, 256, true},   // few columns: the narrowest tile, B packed
      {77, 17, 90, 8, 32, 256, true},
      {70, 9, 50, 12, 16, 256, true},
      {100, 300, 200, 8, 48, 384, false},  // B in L2: in place
      {300, 400, 600, 8, 32, 384, true},   // hundreds of rows over a B beyond a quarter of L2: packed
      {130, 700, 800, 6, 64, 400, true},   // the general case: 6x64, B packed, K in two balanced slabs of 400
      {130, 700, 1025, 6, 64, 352, true},  // three slabs of at most 352, not 512 + 512 + 1
  };
  for (const Expected& e : cases)
    for (int threads : {1, 2}) {
      Case t{e.m, e.n, e.k};
      t.threads = threads;
      SCOPED_TRACE(t.describe());
      Operands ops(t, 11);
      const GemmProblem problem = runtime.describe(ops.args);
      const CpuGemmConfig config = CpuGemmConfig::default_for(problem, two_units);
      EXPECT_EQ(config.mr, e.mr);
      EXPECT_EQ(config.nr, e.nr);
      EXPECT_EQ(config.kc, e.kc);
      EXPECT_EQ(config.pack_b, e.pack_b);
      const GemmReference ref = reference_gemm(ops.args);
      runtime.compile(problem, config).run(ops.args);
      const Comparison cmp = compare_gemm(ref, ops.d.view, true);
      EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
      EXPECT_EQ(written(ops.d), e.m * e.n);
    }
  // B column-major, packed into rows: the general case's 6x64 too, from 33 rows.
  for (std::int64_t m : {200, 20}) {
    Case t{m, 300, 400};
    t.lb = kCol;
    SCOPED_TRACE(t.describe());
    Operands ops(t, 12);
    const GemmProblem problem = runtime.describe(ops.args);
    const CpuGemmConfig config = CpuGemmConfig::default_for(problem, two_units);
    if (m > 32) {
      EXPECT_EQ(config.mr, 6);
      EXPECT_EQ(config.nr, 64);
      EXPECT_EQ(config.kc, 400);  // one slab
    }
    const GemmReference ref = reference_gemm(ops.args);
    runtime.compile(problem, config).run(ops.args);
    const Comparison cmp = compare_gemm(ref, ops.d.view, true);
    EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, first " << cmp.first_mismatch;
  }
}

TEST(GemmNumerics, IrOptimisationLevelsAgree) {
  for (int level : {2, 3}) {
    Runtime runtime({"cpu", 0, level});
    Case t{67, 99, 301};
    t.epilogue = "silu(acc + bias[n])";
    t.integers = false;
    check_case(runtime, t);
  }
}

std::size_t count_matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<std::size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(GemmAssembly, UsesTheWidestFmaOfTheIsa) {
  GemmProblem p;
  p.m = p.n = p.k = 256;
  if (CpuTarget::host_supports(CpuIsa::Avx512)) {
    const CpuTarget t = CpuTarget::parse("cpu:avx512");
    const std::string s = gemm_host_assembly({p.signature, CpuGemmConfig::default_for(p, t), t});
    EXPECT_GE(count_matches(s, R"(vfmadd\d+ps\s+[^\n]*%zmm)"), 16u) << "expected 512-bit FMAs";
  }
  const CpuTarget t = CpuTarget::parse("cpu:avx2");
  const std::string s = gemm_host_assembly({p.signature, CpuGemmConfig::default_for(p, t), t});
  EXPECT_GE(count_matches(s, R"(vfmadd\d+ps\s+[^\n]*%ymm)"), 12u);
  EXPECT_EQ(count_matches(s, "%zmm"), 0u) << "the AVX2 kernel must not use AVX-512 registers";
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A bf16 copy of an f32 matrix in `storage`, viewed as the matrix is.
Tensor bf16_view(const Matrix& m, std::vector<std::uint16_t>& storage) {
  storage.resize(m.storage.size());
  for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = to_bf16(m.storage[i]);
  Tensor t = m.view;
  t.data = storage.data();
  t.dtype = DType::bf16;
  return t;
}

// bf16 A and B (small integers are exact in bf16, so sums are exact in f32): edge shapes, odd K, several slabs.
TEST(GemmBf16, EdgeShapesAreExact) {
  Runtime runtime;
  if (!runtime.target().avx512_bf16) GTEST_SKIP() << "host lacks avx512_bf16";
  std::vector<std::array<std::int64_t, 3>> shapes = edge_shapes();
  shapes.push_back({37, 70, 1031});  // two K slabs and an odd last one
  shapes.push_back({3, 500, 1200});  // the in-place-B class shapes fall back to packed pairs for bf16
  int i = 0;
  for (const auto& [m, n, k] : shapes) {
    Case t{m, n, k};
    t.ld = (i++ % 2) ? kRow : kCol;
    t.epilogue = i % 3 ? "" : "relu(alpha*acc + bias[n])";
    SCOPED_TRACE(t.describe());
    Operands ops(t, 17);
    std::vector<std::uint16_t> a16, b16;
    ops.args.a = bf16_view(ops.a, a16);
    ops.args.b = bf16_view(ops.b, b16);
    const GemmReference ref = reference_gemm(ops.args);
    runtime.gemm(ops.args);
    const Comparison cmp = compare_gemm(ref, ops.d.view, true);
    EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch;
    EXPECT_EQ(written(ops.d), m * n);
  }
}

// AMX tiles with the tile instructions' effect emulated in vector code (CpuGemmConfig::kAmxEmulated), so that every
// host with avx512_bf16 checks the AMX kernels' tiling: every tile shape, M, N and K edges (K = 1, 2, one and several
// 32-step blocks, a partial last one, several slabs), B and D either layout, an epilogue. Small integers keep the
// sums exact.
TEST(GemmBf16, AmxTilesEmulatedAreExact) {
  Runtime runtime;
  if (!runtime.target().avx512_bf16) GTEST_SKIP() << "host lacks avx512_bf16";
  int i = 0;
  for (const auto& [m, n, k] :
       {std::array<std::int64_t, 3>{1, 16, 1}, {17, 33, 2}, {131, 77, 203}, {45, 100, 1000}, {32, 32, 64}, {50, 20, 0}})
    for (const auto& [mr, nr] : {std::pair{16, 16}, {16, 48}, {32, 16}, {32, 32}}) {
      Case t{m, n, k};
      t.lb = i % 2 ? kRow : kCol;
      t.ld = i % 3 ? kRow : kCol;
      t.epilogue = i % 4 ? "" : "relu(alpha*acc + bias[n])";
      ++i;
      SCOPED_TRACE(fmt::format("{} tile {}x{}", t.describe(), mr, nr));
      Operands ops(t, 23);
      std::vector<std::uint16_t> a16, b16;
      ops.args.a = bf16_view(ops.a, a16);
      ops.args.b = bf16_view(ops.b, b16);
      const GemmReference ref = reference_gemm(ops.args);
      const GemmProblem p = runtime.describe(ops.args);
      CpuGemmConfig c = amx_config(p, runtime.target(), mr, nr, 64);  // two blocks per slab: several slabs
      c.amx = CpuGemmConfig::kAmxEmulated;
      runtime.compile(p, c).run(ops.args);
      const Comparison cmp = compare_gemm(ref, ops.d.view, true);
      EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch;
      EXPECT_EQ(written(ops.d), m * n);
    }
}

// B column-major (nn.Linear's weight, N×K): dot kernels along K up to 128 rows, pairs packed from B's columns above;
// every variant of both, on A, B and D flush against inaccessible pages (a read past K or past a column faults).
// Small integers are exact in bf16 and their f32 sums exact.
TEST(GemmBf16, ColumnMajorBEveryVariantIsExact) {
  Runtime runtime;
  if (!runtime.target().avx512_bf16) GTEST_SKIP() << "host lacks avx512_bf16";
  for (const auto& [m, n, k] : {std::array<std::int64_t, 3>{29, 77, 203}, {131, 40, 75}, {3, 17, 5}}) {
    SCOPED_TRACE(fmt::format("{}x{}x{}", m, n, k));
    test::Guarded<std::uint16_t> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
    test::Guarded<float> d(static_cast<std::size_t>(m * n));
    std::mt19937 rng(static_cast<std::uint32_t>(m + n + k));
    std::uniform_int_distribution<int> small(-3, 3);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = to_bf16(static_cast<float>(small(rng)));
    for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = to_bf16(static_cast<float>(small(rng)));
    GemmArgs args;
    args.a = Tensor::matrix(a.data(), m, k, kRow, 0, DType::bf16);
    args.b = Tensor::matrix(b.data(), k, n, kCol, 0, DType::bf16);  // element (p, j) at j·k + p
    args.d = Tensor::matrix(d.data(), m, n);
    const GemmProblem p = runtime.describe(args);
    const std::vector<CpuGemmConfig> space = cpu_variants(p, runtime.target());
    ASSERT_FALSE(space.empty());
    EXPECT_EQ(std::any_of(space.begin(), space.end(), [](const CpuGemmConfig& c) { return c.dot; }), m <= 128);
    for (const CpuGemmConfig& c : space) {
      SCOPED_TRACE(to_json(c).dump());
      runtime.compile(p, c).run(args);
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (std::int64_t q = 0; q < k; ++q) sum += from_bf16(a.data()[i * k + q]) * from_bf16(b.data()[j * k + q]);
          wrong += d.data()[i * n + j] != static_cast<float>(sum);
        }
      EXPECT_EQ(wrong, 0);
    }
  }
}

TEST(GemmBf16, UnsupportedCombinationsAreConfigErrors) {
  Runtime runtime;
  GemmProblem p;
  p.m = p.n = p.k = 64;
  p.signature.a.dtype = p.signature.b.dtype = DType::bf16;
  p.signature.a.layout = Layout::col_major();
  if (!runtime.target().avx512_bf16) {
    EXPECT_THROW(runtime.compile(p), ConfigError);
    return;
  }
  EXPECT_THROW(runtime.compile(p), ConfigError);  // column-major A
  p.signature.a.layout = Layout::row_major();
  p.signature.b.dtype = DType::f32;
  EXPECT_THROW(runtime.compile(p), ConfigError);  // mixed bf16 × f32
  p.signature.b.dtype = DType::bf16;
  EXPECT_NO_THROW(runtime.compile(p));
}

}  // namespace
}  // namespace tessera
