// SpMM and SDDMM against double-precision references (SpMM through the dense GEMM reference of the densified
// matrix, SDDMM entry by entry): formats, index widths, value types, layouts, edges, epilogues, ISAs, thread counts
// and config variants; the inspector, the generators, Matrix Market files and bad input.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "generator/cost/sparse_cost.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/sparse/sparse_json.hpp"
#include "ops/sparse/sparse_binding.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.hpp"
#include "tessera/tuner.hpp"
#include "tests/test_util.hpp"

namespace tessera {
namespace {

using test::Matrix;

bool host_has_avx512() { return CpuTarget::host().isa == CpuIsa::Avx512; }

// A pattern from coordinates in the given storage.
SparseMatrixData store(const CooMatrix& coo, int br = 1, int bc = 1, int bits = 32, DType value = DType::f32) {
  return br == 1 && bc == 1 ? SparseMatrixData::csr(coo, bits, value) : SparseMatrixData::bsr(coo, br, bc, bits, value);
}

CooMatrix random_coo(std::int64_t m, std::int64_t k, double density, unsigned seed) {
  return generate_pattern(fmt::format("uniform:{},{},{},{}", m, k, density, seed));
}

// Bound tensors for an epilogue: bias[n], scale[m], residual[m,n].
struct EpilogueTensors {
  Matrix bias, scale, residual, c;
  EpilogueTensors(std::int64_t m, std::int64_t n, std::mt19937& rng)
      : bias(1, 1, n, Layout::row_major(), 0),
        scale(1, m, 1, Layout::col_major(), 0),
        residual(1, m, n, Layout::row_major()),
        c(1, m, n, Layout::col_major()) {
    bias.fill_uniform(rng);
    scale.fill_uniform(rng);
    residual.fill_uniform(rng);
    c.fill_uniform(rng);
  }
  void bind(SpmmArgs& a) {
    for (const auto& t : a.epilogue.tensors()) {
      if (t.name == "bias") a.inputs["bias"] = Tensor::vector(bias.storage.data(), bias.view.shape[1]);
      if (t.name == "scale") a.inputs["scale"] = Tensor::vector(scale.storage.data(), scale.view.shape[0]);
      if (t.name == "residual") a.inputs["residual"] = residual.view;
    }
    if (a.epilogue.reads_c()) a.c = c.view;
  }
};

struct SpmmCase {
  SpmmCase(std::int64_t m_, std::int64_t k_, std::int64_t n_, double density_)
      : m(m_), k(k_), n(n_), density(density_) {}
  std::int64_t m, k, n;
  double density;
  int br = 1, bc = 1, bits = 32;
  DType value = DType::f32;
  Layout b_layout = Layout::row_major();
  DType b_dtype = DType::f32;
  std::string epilogue = "alpha*acc + beta*c";
  float beta = 0;
  int threads = 1;
  std::string target = "cpu";
  std::string pattern;  // a generator request instead of uniform
};

void check_spmm(const SpmmCase& t, const CpuSpmmConfig* config = nullptr) {
  SCOPED_TRACE(fmt::format("{}x{}x{} d={} block {}x{} i{} {} b {} {} '{}' beta {} threads {} {} {}", t.m, t.k, t.n,
                           t.density, t.br, t.bc, t.bits, dtype_name(t.value), t.b_layout.name(), dtype_name(t.b_dtype),
                           t.epilogue, t.beta, t.threads, t.target, t.pattern));
  std::mt19937 rng(static_cast<unsigned>(t.m * 131 + t.k * 7 + t.n));
  const CooMatrix coo = t.pattern.empty() ? random_coo(t.m, t.k, t.density, 3) : generate_pattern(t.pattern);
  const SparseMatrixData a = store(coo, t.br, t.bc, t.bits, t.value);
  Matrix b(1, coo.cols, t.n, t.b_layout), d(1, coo.rows, t.n, Layout::row_major());
  b.fill_uniform(rng);
  std::vector<std::uint16_t> b16;
  SpmmArgs args;
  args.a = a.view();
  args.b = b.view;
  if (t.b_dtype == DType::bf16) {
    b16.resize(b.storage.size());
    for (std::size_t i = 0; i < b16.size(); ++i) b16[i] = to_bf16(b.storage[i]);
    args.b.data = b16.data();
    args.b.dtype = DType::bf16;
  }
  args.d = d.view;
  args.alpha = 1.25f;
  args.beta = t.beta;
  args.set_epilogue(t.epilogue);
  args.threads = t.threads;
  EpilogueTensors tensors(coo.rows, t.n, rng);
  tensors.bind(args);
  const GemmReference ref = reference_spmm(args);
  RuntimeOptions options;
  options.target = t.target;
  options.threads = 2;
  Runtime rt(options);
  if (config) {
    rt.compile(rt.describe(args), *config).run(args);
  } else {
    rt.spmm(args);
  }
  const Comparison cmp = compare_gemm(ref, d.view);
  EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch << " (" << cmp.mismatches << " mismatches)";
}

TEST(Spmm, CsrShapesAndEdges) {
  for (std::int64_t n : {1, 7, 16, 33, 64, 100, 257})
    for (double density : {0.02, 0.3}) check_spmm({37, 91, n, density});
  check_spmm({1, 1, 5, 1.0});
  check_spmm({0, 0, 8, 0.5});
  check_spmm({5, 0, 8, 0.5});
  check_spmm({12, 20, 0, 0.5});
  check_spmm({40, 30, 24, 0.0});  // no entries: D = epilogue(0)
}

TEST(Spmm, RowShapes) {
  // One dense row among empty ones, and power-law rows.
  CooMatrix coo{50, 300, {}, {}, {}};
  for (std::int64_t j = 0; j < 300; ++j) coo.row.push_back(23), coo.col.push_back(j), coo.value.push_back(0.5 - j % 7);
  const SparseMatrixData a = SparseMatrixData::csr(coo);
  std::mt19937 rng(5);
  Matrix b(1, 300, 70, Layout::row_major()), d(1, 50, 70, Layout::row_major());
  b.fill_uniform(rng);
  SpmmArgs args;
  args.a = a.view();
  args.b = b.view;
  args.d = d.view;
  Runtime rt;
  for (int threads : {1, 2}) {
    args.threads = threads;
    rt.spmm(args);
    const Comparison cmp = compare_gemm(reference_spmm(args), d.view);
    EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch;
  }
  SpmmCase power{0, 0, 64, 0};
  power.pattern = "powerlaw:2000,1500,0.004,9";
  for (int threads : {1, 2}) {
    power.threads = threads;
    check_spmm(power);
  }
  power.pattern = "banded:300,400,0.05,2";
  check_spmm(power);
}

TEST(Spmm, IndexWidthsValuesAndLayouts) {
  for (int bits : {32, 64})
    for (DType value : {DType::f32, DType::bf16}) {
      SpmmCase t{45, 60, 40, 0.1};
      t.bits = bits;
      t.value = value;
      check_spmm(t);
    }
  for (Layout layout : {Layout::row_major(), Layout::col_major()})
    for (DType b : {DType::f32, DType::bf16}) {
      SpmmCase t{33, 50, 70, 0.15};
      t.b_layout = layout;
      t.b_dtype = b;
      check_spmm(t);
    }
}

TEST(Spmm, Epilogues) {
  for (const char* e : {"relu(acc + bias[n])", "acc * scale[m] + residual[m,n]", "gelu(alpha*acc)",
                        "alpha*acc + beta*c", "tanh(acc) - c"}) {
    SpmmCase t{29, 41, 50, 0.2};
    t.epilogue = e;
    t.beta = 0.5f;
    check_spmm(t);
  }
}

TEST(Spmm, BlockSparse) {
  for (auto [br, bc] : {std::pair{2, 2}, {4, 4}, {3, 5}, {16, 16}, {1, 4}, {8, 1}})
    for (auto [m, k] : {std::pair<std::int64_t, std::int64_t>{48, 64}, {37, 53}}) {
      SpmmCase t{m, k, 40, 0.1};
      t.br = br;
      t.bc = bc;
      t.epilogue = "relu(acc + bias[n])";
      check_spmm(t);
    }
  SpmmCase t{0, 0, 64, 0};
  t.pattern = "blocks:96,128,0.25,4,16";
  t.br = t.bc = 16;
  for (int threads : {1, 2}) {
    t.threads = threads;
    check_spmm(t);
  }
}

// B larger than the L2 budget with rows read many times: K is tiled into column panels whose partial sums go
// through D (the last panel applies the epilogue). Checked with epilogues reading C and tensors, BSR, bf16 B.
TEST(Spmm, ColumnPanels) {
  for (const char* e : {"alpha*acc + beta*c", "relu(acc + bias[n]) * scale[m]"})
    for (int threads : {1, 2}) {
      SpmmCase t{700, 1500, 200, 0.04};
      t.epilogue = e;
      t.beta = 0.5f;
      t.threads = threads;
      check_spmm(t);
      t.br = 4, t.bc = 3;
      check_spmm(t);
    }
  SpmmCase t{300, 3000, 130, 0.05};
  t.b_dtype = DType::bf16;
  check_spmm(t);
  // The panels are really made (and kept with the plan): one per 512 KiB of B rows.
  const SparseMatrixData a = SparseMatrixData::csr(random_coo(300, 3000, 0.05, 3));
  const SparsePlan plan = SparsePlan::inspect(a.view(), 1);
  const auto panels = plan.column_panels(a.view(), 1000);
  ASSERT_EQ(panels->size(), 3u);
  std::int64_t total = 0;
  for (const auto& p : *panels) total += p.view().entries;
  EXPECT_EQ(total, a.view().entries);
  EXPECT_EQ(plan.column_panels(a.view(), 1000), panels);
}

// B wide and large with rows read many times: N is tiled too, into column panels of B packed side by side, each
// over all of A or over A's K panels; the last column panel is narrower than the others (N not a multiple of 256).
TEST(Spmm, ColumnPanelsOfD) {
  for (const char* e : {"alpha*acc + beta*c", "relu(acc + bias[n]) * scale[m]"})
    for (int threads : {1, 2}) {
      SpmmCase whole_k{600, 240, 600, 0.2};      // column panels over all of A (B is 240 KiB a 1 KiB column panel wide:
                                                 // within every host's K panel budget)
      SpmmCase panelled_k{300, 1200, 520, 0.3};  // and over A's K panels
      for (SpmmCase* t : {&whole_k, &panelled_k}) {
        t->epilogue = e;
        t->beta = 0.5f;
        t->threads = threads;
        check_spmm(*t);
      }
    }
  SpmmCase t{320, 1000, 700, 0.25};
  t.b_dtype = DType::bf16;
  check_spmm(t);
  // The binding really tiles N (and K in the second shape).
  for (const auto& [m, k, n, density, k_panels] :
       {std::tuple{600L, 240L, 600L, 0.2, false}, std::tuple{300L, 1200L, 520L, 0.3, true}}) {
    const SparseMatrixData a = SparseMatrixData::csr(random_coo(m, k, density, 3));
    std::vector<float> b(static_cast<std::size_t>(k * n)), d(static_cast<std::size_t>(m * n));
    SpmmArgs args;
    args.a = a.view();
    args.b = Tensor::matrix(b.data(), k, n);
    args.d = Tensor::matrix(d.data(), m, n);
    const SpmmBinding bound = bind_spmm(args, 1);
    EXPECT_EQ(bound.column_panel, 256) << m << "x" << k << "x" << n;
    EXPECT_EQ(bound.panels != nullptr, k_panels) << m << "x" << k << "x" << n;
  }
}

// Rows dense enough for panels of B within the L1, each task taking its rows through every panel: the partial sums
// and the epilogue as without panels, on edge widths of N, 1 and 2 threads, a bf16 B.
TEST(Spmm, L1PanelsPerTask) {
  for (const char* e : {"alpha*acc + beta*c", "relu(acc + bias[n]) * scale[m]"})
    for (int threads : {1, 2})
      for (std::int64_t n : {64L, 70L}) {
        SpmmCase t{500, 800, n, 0.3};
        t.epilogue = e;
        t.beta = 0.5f;
        t.threads = threads;
        check_spmm(t);
      }
  SpmmCase t{500, 800, 48, 0.3};
  t.b_dtype = DType::bf16;
  check_spmm(t);
  // The binding takes the L1 panels here (240 entries a row, 26 a panel of 96 B rows), not for sparser rows.
  for (const auto& [density, l1] : {std::pair{0.3, true}, std::pair{0.02, false}}) {
    const SparseMatrixData a = SparseMatrixData::csr(random_coo(500, 800, density, 3));
    std::vector<float> b(800 * 64), d(500 * 64);
    SpmmArgs args;
    args.a = a.view();
    args.b = Tensor::matrix(b.data(), 800, 64);
    args.d = Tensor::matrix(d.data(), 500, 64);
    const SpmmBinding bound = bind_spmm(args, 1);
    EXPECT_EQ(bound.panels != nullptr && bound.panels_per_task, l1) << density;
  }
}

// The SpMM reference (row by row over the stored entries) against the GEMM reference of the densified matrix, CSR
// and BSR with partial edge blocks: the same values; only the tolerance differs (it counts the products a row really
// adds, not K). And a NaN in a B row that no entry names reaches nothing.
TEST(Spmm, ReferenceAgreesWithTheDensifiedGemm) {
  // Columns 9-11 (block column 3 of 3-wide blocks) hold no entry.
  const CooMatrix full = random_coo(61, 83, 0.1, 9);
  CooMatrix coo{full.rows, full.cols, {}, {}, {}};
  for (std::size_t x = 0; x < full.row.size(); ++x)
    if (full.col[x] < 9 || full.col[x] > 11) {
      coo.row.push_back(full.row[x]);
      coo.col.push_back(full.col[x]);
      coo.value.push_back(full.value[x]);
    }
  for (auto [br, bc] : std::vector<std::pair<int, int>>{{1, 1}, {4, 3}}) {
    const SparseMatrixData a = store(coo, br, bc);
    std::mt19937 rng(4);
    Matrix b(1, 83, 19, Layout::row_major()), c(1, 61, 19, Layout::row_major()), d(1, 61, 19, Layout::row_major());
    b.fill_uniform(rng);
    c.fill_uniform(rng);
    SpmmArgs args;
    args.a = a.view();
    args.b = b.view;
    args.c = c.view;
    args.d = d.view;
    args.alpha = 1.5f, args.beta = 0.5f;
    args.set_epilogue("tanh(alpha*acc) + beta*c");
    const GemmReference sparse = reference_spmm(args);
    std::vector<float> dense = densify(args.a);
    GemmArgs g;
    g.a = Tensor::matrix(dense.data(), 61, 83);
    g.b = b.view, g.c = c.view, g.d = d.view;
    g.alpha = args.alpha, g.beta = args.beta, g.epilogue = args.epilogue;
    const GemmReference gemm = reference_gemm(g);
    ASSERT_EQ(sparse.values.size(), gemm.values.size());
    for (std::size_t x = 0; x < gemm.values.size(); ++x) {
      EXPECT_NEAR(sparse.values[x], gemm.values[x], 1e-12) << "element " << x << ", blocks " << br << "x" << bc;
      EXPECT_LE(sparse.tolerance[x], gemm.tolerance[x]) << "element " << x;
    }
    b.at(0, 10, 7) = NAN;
    for (double v : reference_spmm(args).values) EXPECT_FALSE(std::isnan(v)) << "B row 10 is named by no entry";
    EXPECT_TRUE(std::isnan(reference_gemm(g).values[7])) << "the dense product multiplies it by zeros";
  }
}

// In place (D is C): the partial sums must not go through D, so the call runs unpanelled and still matches.
TEST(Spmm, InPlaceWithLargeB) {
  const CooMatrix coo = random_coo(400, 2000, 0.05, 5);
  const SparseMatrixData a = SparseMatrixData::csr(coo);
  std::mt19937 rng(3);
  Matrix b(1, 2000, 160, Layout::row_major()), d(1, 400, 160, Layout::row_major());
  b.fill_uniform(rng);
  d.fill_uniform(rng);
  SpmmArgs args;
  args.a = a.view();
  args.b = b.view;
  args.c = d.view;
  args.d = d.view;
  args.beta = 1;
  const GemmReference ref = reference_spmm(args);
  Runtime rt;
  rt.spmm(args);
  const Comparison cmp = compare_gemm(ref, d.view);
  EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch;
}

TEST(Spmm, ThreadsAndIsas) {
  std::vector<std::string> targets{"cpu:avx2"};
  if (host_has_avx512()) targets.push_back("cpu:avx512");
  for (const std::string& target : targets)
    for (int threads : {1, 2}) {
      SpmmCase t{301, 257, 96, 0.05};
      t.target = target;
      t.threads = threads;
      check_spmm(t);
      t.br = t.bc = 4;
      check_spmm(t);
    }
}

// A CSR row of B up to 256 bytes of f32 accumulators runs as one tile (4 AVX-512 vectors, 8 AVX2 ones: 5 and 7 too,
// which no other rule picks), wider rows in tiles of 2-4 vectors; the space holds the whole-row tile; then such tiles
// on AVX2, with and without a masked tail, against the reference.
TEST(Spmm, RowsOfUpTo256BytesRunAsOneTile) {
  const auto problem = [](std::int64_t n) {
    SpmmProblem p;
    p.m = 4096, p.k = 4096, p.n = n;
    p.pattern.nnz = 4096 * 200;
    return p;
  };
  const CpuTarget avx2 = CpuTarget::named("cpu:avx2"), avx512 = CpuTarget::named("cpu:avx512");
  for (const auto& [n, nv2, nv512] : std::vector<std::tuple<int, int, int>>{
           {40, 5, 3}, {53, 7, 4}, {56, 7, 4}, {64, 8, 4}, {96, 4, 3}, {100, 2, 4}}) {
    EXPECT_EQ(CpuSpmmConfig::default_for(problem(n), avx2).nv, nv2) << "N = " << n;
    EXPECT_EQ(CpuSpmmConfig::default_for(problem(n), avx512).nv, nv512) << "N = " << n;
  }
  const auto space = cpu_spmm_variants(problem(40), avx2);
  EXPECT_TRUE(std::any_of(space.begin(), space.end(), [](const CpuSpmmConfig& c) { return c.nv == 5; }));
  for (std::int64_t n : {53, 56})
    for (int threads : {1, 2}) {
      SpmmCase t{203, 311, n, 0.05};
      t.target = "cpu:avx2";
      t.threads = threads;
      check_spmm(t);
    }
}

// The edge tile runs by its count of vectors (each count its own loop, only the last vector masked): every count,
// with a last vector of all, one and all-but-one lanes, for the widest tile and a three-vector one.
TEST(Spmm, EdgeTilesOfEveryWidth) {
  const int lanes = CpuTarget::host().vector_lanes();
  for (const int nv : {8, 3}) {
    const CpuSpmmConfig c{nv, 1, 0};
    for (int whole = 0; whole < nv; ++whole)
      for (const int extra : {0, 1, lanes - 1}) {
        const std::int64_t n = std::int64_t{nv} * lanes + std::int64_t{whole} * lanes + extra;
        SCOPED_TRACE(fmt::format("nv {} n {}", nv, n));
        check_spmm({9, 13, n, 0.4}, &c);
      }
  }
}

TEST(Spmm, EveryVariantMatches) {
  SpmmCase t{61, 77, 90, 0.1};
  const CooMatrix coo = random_coo(t.m, t.k, t.density, 3);
  const SparseMatrixData a = SparseMatrixData::csr(coo);
  Matrix b(1, t.k, t.n, Layout::row_major()), d(1, t.m, t.n, Layout::row_major());
  SpmmArgs args;
  args.a = a.view();
  args.b = b.view;
  args.d = d.view;
  const SpmmProblem p = describe_spmm(args);
  const auto variants = cpu_spmm_variants(p, CpuTarget::host());
  EXPECT_GT(variants.size(), 10u);
  for (const CpuSpmmConfig& c : variants) {
    SCOPED_TRACE(to_json(c).dump());
    check_spmm(t, &c);
  }
}

struct SddmmCase {
  SddmmCase(std::int64_t m_, std::int64_t n_, std::int64_t k_, double density_, std::string epilogue_ = "acc")
      : m(m_), n(n_), k(k_), density(density_), epilogue(std::move(epilogue_)) {}
  std::int64_t m, n, k;
  double density;
  std::string epilogue;
  int bits = 32;
  DType value = DType::f32;
  Layout a_layout = Layout::row_major(), b_layout = Layout::row_major();
  DType ab_dtype = DType::f32;
  int threads = 1;
  std::string target = "cpu";
  std::string pattern;
};

void check_sddmm(const SddmmCase& t, const CpuSddmmConfig* config = nullptr) {
  SCOPED_TRACE(fmt::format("{}x{} k={} d={} '{}' i{} {} a {} b {} {} threads {} {} {}", t.m, t.n, t.k, t.density,
                           t.epilogue, t.bits, dtype_name(t.value), t.a_layout.name(), t.b_layout.name(),
                           dtype_name(t.ab_dtype), t.threads, t.target, t.pattern));
  std::mt19937 rng(static_cast<unsigned>(t.m * 17 + t.n * 3 + t.k));
  const CooMatrix coo = t.pattern.empty() ? random_coo(t.m, t.n, t.density, 4) : generate_pattern(t.pattern);
  const SparseMatrixData pattern = SparseMatrixData::csr(coo, t.bits, t.value);
  Matrix a(1, coo.rows, t.k, t.a_layout), b(1, coo.cols, t.k, t.b_layout);
  a.fill_uniform(rng);
  b.fill_uniform(rng);
  std::vector<std::uint16_t> a16, b16;
  SddmmArgs args;
  args.pattern = pattern.view();
  args.a = a.view;
  args.b = b.view;
  if (t.ab_dtype == DType::bf16) {
    for (float x : a.storage) a16.push_back(to_bf16(x));
    for (float x : b.storage) b16.push_back(to_bf16(x));
    args.a.data = a16.data(), args.a.dtype = DType::bf16;
    args.b.data = b16.data(), args.b.dtype = DType::bf16;
  }
  std::vector<float> out(static_cast<std::size_t>(args.pattern.entries) + 1, -7.0f),
      bias(static_cast<std::size_t>(coo.cols)), scale(static_cast<std::size_t>(coo.rows));
  for (float& x : bias) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  for (float& x : scale) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  args.out = Tensor::vector(out.data(), args.pattern.entries);
  args.alpha = 0.75f;
  args.set_epilogue(t.epilogue);
  for (const auto& e : args.epilogue.tensors())
    args.inputs[e.name] =
        e.form == IndexForm::N ? Tensor::vector(bias.data(), coo.cols) : Tensor::vector(scale.data(), coo.rows);
  args.threads = t.threads;
  const SddmmReference ref = reference_sddmm(args);
  RuntimeOptions options;
  options.target = t.target;
  options.threads = 2;
  Runtime rt(options);
  if (config)
    rt.compile(rt.describe(args), *config).run(args);
  else
    rt.sddmm(args);
  const Comparison cmp = compare_sddmm(ref, args.out);
  EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch << " (" << cmp.mismatches << " mismatches)";
  EXPECT_EQ(out.back(), -7.0f) << "written past the last entry";
}

TEST(Sddmm, ShapesAndEpilogues) {
  for (std::int64_t k : {1, 7, 16, 64, 100})
    for (double density : {0.03, 0.4}) check_sddmm({41, 57, k, density});
  check_sddmm({1, 1, 3, 1.0});
  check_sddmm({0, 0, 8, 0.5});
  check_sddmm({9, 13, 0, 0.5});
  for (const char* e :
       {"acc * s", "acc / sqrt(64) + s", "alpha*acc + bias[n] + scale[m]", "exp(acc - s)", "s > 0 ? acc : 0"})
    check_sddmm({30, 44, 33, 0.2, e});
}

TEST(Sddmm, FormatsLayoutsThreadsIsas) {
  for (int bits : {32, 64})
    for (DType value : {DType::f32, DType::bf16}) {
      SddmmCase t{40, 50, 24, 0.2, "acc * s"};
      t.bits = bits;
      t.value = value;
      check_sddmm(t);
    }
  SddmmCase t{35, 45, 40, 0.2};
  t.a_layout = Layout::col_major();
  t.b_layout = Layout::col_major();
  check_sddmm(t);
  t.ab_dtype = DType::bf16;
  check_sddmm(t);
  std::vector<std::string> targets{"cpu:avx2"};
  if (host_has_avx512()) targets.push_back("cpu:avx512");
  for (const std::string& target : targets)
    for (int threads : {1, 2}) {
      SddmmCase p{0, 0, 64, 0};
      p.pattern = "powerlaw:1500,1200,0.005,3";
      p.target = target;
      p.threads = threads;
      check_sddmm(p);
    }
  SddmmCase base{23, 31, 70, 0.3, "acc * s"};
  const CooMatrix coo = random_coo(23, 31, 0.3, 4);
  const SparseMatrixData pattern = SparseMatrixData::csr(coo);
  Matrix a(1, 23, 70, Layout::row_major()), b(1, 31, 70, Layout::row_major());
  std::vector<float> out(static_cast<std::size_t>(pattern.view().entries));
  SddmmArgs args;
  args.pattern = pattern.view();
  args.a = a.view;
  args.b = b.view;
  args.out = Tensor::vector(out.data(), pattern.view().entries);
  args.set_epilogue("acc * s");
  for (const CpuSddmmConfig& c : cpu_sddmm_variants(describe_sddmm(args), CpuTarget::parse("cpu"))) {
    SCOPED_TRACE(to_json(c).dump());
    check_sddmm(base, &c);
  }
}

// K taken in panels (partial sums kept in out between passes, the epilogue on the last): panels that divide K and
// that leave a tail, epilogues reading s, tensors and alpha, one and two threads, both vector widths; and the
// default takes K in panels where B is beyond the L2.
TEST(Sddmm, KPanels) {
  std::vector<std::string> targets{"cpu:avx2"};
  if (host_has_avx512()) targets.push_back("cpu:avx512");
  for (const std::string& target : targets)
    for (int panel : {16, 32})
      for (std::int64_t k : {33, 64, 100})
        for (const char* e : {"acc", "acc * s", "alpha*acc + bias[n] + scale[m]", "exp(acc - s)"})
          for (int threads : {1, 2}) {
            SddmmCase t{37, 51, k, 0.3, e};
            t.target = target;
            t.threads = threads;
            CpuSddmmConfig c;
            c.k_panel = panel;
            SCOPED_TRACE(fmt::format("k_panel {}", panel));
            check_sddmm(t, &c);
          }
  SddmmCase big{0, 0, 256, 0};
  big.pattern = "uniform:8192,2048,0.01,5";  // B 2048 x 512: 4 MiB; 80 entries a B row
  big.k = 512;
  big.epilogue = "acc * s";
  check_sddmm(big);

  CpuTarget target = CpuTarget::parse("cpu:avx2");
  target.l2_bytes = 1 << 20;
  SddmmProblem p;
  p.m = 4096, p.n = 4096, p.k = 256;
  p.pattern.nnz = 4096 * 41;
  EXPECT_EQ(CpuSddmmConfig::default_for(p, target).k_panel, 64) << "B is 4 MiB, a 64-wide panel of it 1 MiB";
  p.pattern.nnz = 4096 * 4;
  EXPECT_EQ(CpuSddmmConfig::default_for(p, target).k_panel, 0) << "4 entries a B row: packing B costs more";
  p.pattern.nnz = 4096 * 41;
  p.k = 64;
  EXPECT_EQ(CpuSddmmConfig::default_for(p, target).k_panel, 0) << "B is 1 MiB, in the L2 whole";
  p.k = 256;
  target.l2_bytes = 512 << 10;
  EXPECT_EQ(CpuSddmmConfig::default_for(p, target).k_panel, 0) << "a 512 KiB L2 holds too thin a panel";
}

// The tuners time the analytic model's top variants (default_for first) on the given pattern, and a runtime with a
// tuning budget runs the fastest, still matching the reference (with an epilogue reading C and tensors).
TEST(SparseTuner, TimesVariantsAndTheRuntimeUsesTheBest) {
  const SparseMatrixData a = SparseMatrixData::csr(random_coo(300, 400, 0.05, 2));
  Matrix b(1, 400, 48, Layout::row_major()), d(1, 300, 48, Layout::row_major());
  SpmmArgs args;
  args.a = a.view();
  args.b = b.view;
  args.d = d.view;
  Runtime rt;
  TuneOptions options;
  options.top_k = 3;
  options.samples = 2;
  options.sample_ms = 0.2;
  const SpmmProblem p = rt.describe(args);
  const auto r = tune_spmm(rt, p, a.view(), options);
  ASSERT_EQ(r.measured.size(), 3u);
  EXPECT_EQ(r.measured[0].config, CpuSpmmConfig::default_for(p, rt.target()));
  EXPECT_LT(r.best, 3u);
  for (const auto& m : r.measured) EXPECT_GT(m.median_ns, 0);
  std::vector<float> out(static_cast<std::size_t>(a.view().entries));
  Matrix sa(1, 300, 40, Layout::row_major()), sb(1, 400, 40, Layout::row_major());
  SddmmArgs s;
  s.pattern = a.view();
  s.a = sa.view;
  s.b = sb.view;
  s.out = Tensor::vector(out.data(), a.view().entries);
  const auto q = tune_sddmm(rt, rt.describe(s), a.view(), options);
  EXPECT_EQ(q.measured.size(), 3u);
  EXPECT_EQ(q.measured[0].config, CpuSddmmConfig::default_for(rt.describe(s), rt.target()));

  RuntimeOptions tuned;
  tuned.tuning_budget = 2;
  Runtime trt(tuned);
  SpmmCase t{120, 200, 40, 0.1};
  t.epilogue = "relu(acc + bias[n]) + beta*c";
  t.beta = 1;
  std::mt19937 rng(3);
  const SparseMatrixData ta = SparseMatrixData::csr(random_coo(t.m, t.k, t.density, 3));
  Matrix tb(1, t.k, t.n, Layout::row_major()), td(1, t.m, t.n, Layout::row_major());
  tb.fill_uniform(rng);
  SpmmArgs targs;
  targs.a = ta.view();
  targs.b = tb.view;
  targs.d = td.view;
  targs.beta = 1;
  targs.set_epilogue(t.epilogue);
  EpilogueTensors tensors(t.m, t.n, rng);
  tensors.bind(targs);
  const GemmReference ref = reference_spmm(targs);
  trt.spmm(targs);
  const Comparison cmp = compare_gemm(ref, td.view);
  EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch;
}

// Chosen by the pattern: a CSR matrix whose entries cluster into square blocks runs as BSR inside Runtime::spmm (the
// copy kept with the plan, one per block side), with the same results; scattered entries stay CSR. The side follows
// N: whole 16×16 blocks at N = 256 run as such, at N = 64 as blocks of 4 (as fast per value there, and never
// emptier); a band of 21 diagonals at N = 64 is blocks of 4, not the largest side whose blocks are half full (16:
// 2.35 against 1.12 ms, banded:20000,20000,0.002); no side taller than the target's register tile holds.
TEST(SparseInspector, ClusteredEntriesRunAsBlocks) {
  const SparseMatrixData whole = SparseMatrixData::csr(generate_pattern("blocks:256,256,0.25,1,16"));
  const PatternStats whole_stats = SparsePlan::inspect(whole.view(), 1).stats();
  for (double fill : whole_stats.square_block_fill) EXPECT_DOUBLE_EQ(fill, 1.0);
  EXPECT_EQ(square_block_for(whole_stats, 256, 16), 16);
  EXPECT_EQ(square_block_for(whole_stats, 64, 16), 4);
  // A target whose registers hold no 16-row tile (AVX2: 12 accumulators) gets the largest side that fits.
  EXPECT_EQ(cpu_spmm_max_block_rows(CpuTarget::parse("cpu:avx2")), 12);
  EXPECT_EQ(square_block_for(whole_stats, 256, cpu_spmm_max_block_rows(CpuTarget::parse("cpu:avx2"))), 8);
  const PatternStats band =
      SparsePlan::inspect(SparseMatrixData::csr(generate_pattern("banded:2000,2000,0.01")).view(), 1).stats();
  EXPECT_GT(band.square_block_fill[0], band.square_block_fill[1]);
  EXPECT_GT(band.square_block_fill[1], band.square_block_fill[2]);
  EXPECT_GE(band.square_block_fill[2], 0.4);
  EXPECT_EQ(square_block_for(band, 64, 16), 4);
  const PatternStats scattered =
      SparsePlan::inspect(SparseMatrixData::csr(random_coo(200, 200, 0.05, 1)).view(), 1).stats();
  for (double fill : scattered.square_block_fill) EXPECT_LT(fill, 0.2);
  for (std::int64_t n : {1, 64, 256, 4096}) EXPECT_EQ(square_block_for(scattered, n, 16), 1) << n;

  const SparseMatrixData blocks = SparseMatrixData::csr(generate_pattern("blocks:100,90,0.3,1,16"));
  const SparsePlan plan = SparsePlan::inspect(blocks.view(), 1);
  const auto blocked = plan.blocked(blocks.view(), 1, 256, 16);
  ASSERT_TRUE(blocked);
  EXPECT_EQ(blocked->data.view().block_rows, square_block_for(plan.stats(), 256, 16));
  EXPECT_EQ(plan.blocked(blocks.view(), 1, 256, 16), blocked);  // kept
  const auto narrow = plan.blocked(blocks.view(), 1, 64, 16);
  ASSERT_TRUE(narrow);
  EXPECT_EQ(narrow->data.view().block_rows, 4);
  EXPECT_EQ(plan.blocked(blocks.view(), 1, 64, 16), narrow);
  for (DType value : {DType::f32, DType::bf16})
    for (int threads : {1, 2}) {
      SpmmCase t{0, 0, 70, 0};
      t.pattern = "blocks:100,90,0.3,1,16";
      t.value = value;
      t.threads = threads;
      t.epilogue = "relu(acc + bias[n]) * scale[m]";
      check_spmm(t);
    }
  // What tessera-bench's blocks:4096,4096,0.1,1,16 at N = 256 met on an AVX2 host: no valid config for 16x16 blocks.
  SpmmCase avx2{0, 0, 256, 0};
  avx2.pattern = "blocks:256,256,0.25,1,16";
  avx2.target = "cpu:avx2";
  for (int threads : {1, 2}) {
    avx2.threads = threads;
    check_spmm(avx2);
  }
}

// Operands flush against guard pages (from either side), edges everywhere: N and K residues, BSR edge blocks past M
// and K, column panels, an SDDMM row of one entry at the end. A kernel touching anything outside faults.
TEST(SparseKernels, NeverTouchOutsideTheirOperands) {
  for (const bool at_start : {false, true})
    for (const auto& [pattern, n, block] :
         {std::tuple{"uniform:37,53,0.2,1", 33L, 1}, std::tuple{"uniform:37,53,0.2,1", 1L, 1},
          std::tuple{"blocks:37,53,0.4,1,4", 17L, 4}, std::tuple{"uniform:300,3000,0.05,1", 130L, 1},
          std::tuple{"uniform:300,1200,0.3,1", 520L, 1}, std::tuple{"blocks:45,70,0.3,2,16", 70L, 16}}) {
      SCOPED_TRACE(fmt::format("{} N={} block {} {}", pattern, n, block, at_start ? "start" : "end"));
      const CooMatrix coo = generate_pattern(pattern);
      const SparseMatrixData a = block == 1 ? SparseMatrixData::csr(coo) : SparseMatrixData::bsr(coo, block, block);
      test::Guarded<float> b(static_cast<std::size_t>(coo.cols * n), at_start),
          d(static_cast<std::size_t>(coo.rows * n), at_start);
      std::mt19937 rng(1);
      std::uniform_real_distribution<float> dist(-1, 1);
      for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = dist(rng);
      SpmmArgs args;
      args.a = a.view();
      args.b = Tensor::matrix(b.data(), coo.cols, n);
      args.d = Tensor::matrix(d.data(), coo.rows, n);
      const GemmReference ref = reference_spmm(args);
      Runtime rt;
      rt.spmm(args);
      EXPECT_TRUE(compare_gemm(ref, args.d).ok());
    }
  const SparseMatrixData pattern = SparseMatrixData::csr(generate_pattern("powerlaw:64,70,0.05,3"));
  for (const std::int64_t k : {1, 7, 33}) {
    const SparseMatrix v = pattern.view();
    test::Guarded<float> a(static_cast<std::size_t>(v.rows * k)), b(static_cast<std::size_t>(v.cols * k)),
        out(static_cast<std::size_t>(v.entries));
    std::fill(a.data(), a.data() + a.size(), 0.5f);
    std::fill(b.data(), b.data() + b.size(), 0.25f);
    SddmmArgs args;
    args.pattern = v;
    args.a = Tensor::matrix(a.data(), v.rows, k);
    args.b = Tensor::matrix(b.data(), v.cols, k);
    args.out = Tensor::vector(out.data(), v.entries);
    args.set_epilogue("acc * s");
    Runtime rt;
    rt.sddmm(args);
    EXPECT_TRUE(compare_sddmm(reference_sddmm(args), args.out).ok()) << "K=" << k;
  }
}

TEST(SparseInspector, StatsAndBalancedPlan) {
  const CooMatrix coo = generate_pattern("powerlaw:20000,20000,0.0005,11");
  const SparseMatrixData a = SparseMatrixData::csr(coo);
  const SparseMatrix v = a.view();
  const SparsePlan plan = SparsePlan::inspect(v, 2);
  const auto* offsets = static_cast<const std::int32_t*>(v.row_offsets);
  std::int64_t longest = 0, empty = 0;
  double sq = 0;
  for (std::int64_t r = 0; r < v.rows; ++r) {
    const std::int64_t len = offsets[r + 1] - offsets[r];
    longest = std::max(longest, len);
    empty += len == 0;
    sq += static_cast<double>(len * len);
  }
  const double mean = static_cast<double>(v.entries) / static_cast<double>(v.rows);
  EXPECT_EQ(plan.stats().nnz, v.entries);
  EXPECT_EQ(plan.stats().max_row, longest);
  EXPECT_EQ(plan.stats().empty_rows, empty);
  EXPECT_NEAR(plan.stats().mean_row, mean, 1e-9);
  EXPECT_NEAR(plan.stats().stddev_row, std::sqrt(sq / static_cast<double>(v.rows) - mean * mean), 1e-6);
  EXPECT_GT(plan.stats().max_row, 20 * mean) << "R-MAT rows should be skewed";
  // The tasks cover every row once, in order, and none (but a single heavy row) holds more than twice its share.
  const auto& s = plan.splits();
  ASSERT_GE(s.size(), 3u);
  EXPECT_EQ(s.front(), 0);
  EXPECT_EQ(s.back(), v.rows);
  const double share = static_cast<double>(v.entries + 2 * v.rows) / static_cast<double>(s.size() - 1);
  for (std::size_t t = 0; t + 1 < s.size(); ++t) {
    ASSERT_LT(s[t], s[t + 1]);
    const double cost = static_cast<double>(offsets[s[t + 1]] - offsets[s[t]] + 2 * (s[t + 1] - s[t]));
    if (s[t + 1] - s[t] > 1) {
      EXPECT_LT(cost, 2.5 * share + static_cast<double>(longest)) << "task " << t;
    }
  }
  EXPECT_TRUE(plan.describes(v));
  // BSR fill: a block pattern with every value set fills its blocks; a scattered one does not.
  EXPECT_DOUBLE_EQ(SparsePlan::inspect(SparseMatrixData::bsr(generate_pattern("blocks:64,64,0.25,1,8"), 8, 8).view(), 1)
                       .stats()
                       .block_fill,
                   1.0);
  EXPECT_LT(SparsePlan::inspect(SparseMatrixData::bsr(random_coo(64, 64, 0.02, 1), 8, 8).view(), 1).stats().block_fill,
            0.5);
}

TEST(SparsePlan, PreparedCallsReuseThePlanAndNoticeAChange) {
  CooMatrix coo = random_coo(64, 64, 0.1, 8);
  SparseMatrixData a = SparseMatrixData::csr(coo);
  SparseMatrix view = a.view();
  Matrix b(1, 64, 32, Layout::row_major()), d(1, 64, 32, Layout::row_major());
  std::mt19937 rng(1);
  b.fill_uniform(rng);
  SpmmArgs args;
  args.a = view;
  args.b = b.view;
  args.d = d.view;
  args.plan = std::make_shared<const SparsePlan>(SparsePlan::inspect(view, 2));
  Runtime rt;
  rt.spmm(args);
  EXPECT_TRUE(compare_gemm(reference_spmm(args), d.view).ok());
  // Same arrays, the last column index moved (still sorted and in range): the plan no longer describes them.
  auto* indices = const_cast<std::int32_t*>(static_cast<const std::int32_t*>(view.col_indices));
  std::int32_t& last = indices[view.entries - 1];
  ASSERT_GT(view.entries, 2);
  last = last < 63 ? 63 : indices[view.entries - 2] < 62 ? 62 : last;
  ASSERT_NO_THROW(SparsePlan::inspect(view, 1));
  try {
    rt.spmm(args);
    ADD_FAILURE() << "a changed pattern ran with the old plan";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("a.plan"), std::string::npos) << e.what();
  }
}

TEST(Patterns, SeededAndDense) {
  for (const char* kind : {"uniform", "powerlaw", "banded", "blocks"}) {
    SCOPED_TRACE(kind);
    const CooMatrix x = generate_pattern(fmt::format("{}:500,400,0.05,7", kind));
    const CooMatrix y = generate_pattern(fmt::format("{}:500,400,0.05,7", kind));
    const CooMatrix z = generate_pattern(fmt::format("{}:500,400,0.05,8", kind));
    EXPECT_EQ(x.row, y.row);
    EXPECT_EQ(x.col, y.col);
    EXPECT_EQ(x.value, y.value);
    EXPECT_NE(x.value, z.value);
    const double density = static_cast<double>(SparseMatrixData::csr(x).view().entries) / (500.0 * 400.0);
    EXPECT_GT(density, 0.03);
    EXPECT_LT(density, 0.07);
  }
  for (const char* bad :
       {"uniform", "uniform:10", "uniform:10,10", "uniform:10,10,2", "uniform:-1,10,0.1", "uniform:10,10,x",
        "fractal:10,10,0.1", "uniform:10,10,0.1,1,2", "blocks:10,10,0.1,1,0", "uniform:100000000,100000000,0.5"})
    EXPECT_THROW(generate_pattern(bad), InvalidArgument) << bad;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("tessera_sparse_{}_{}", ::getpid(), name)).string();
}

TEST(MatrixMarket, RoundTripGivesTheSameResults) {
  const CooMatrix coo = generate_pattern("powerlaw:300,200,0.02,5");
  const std::string path = temp_path("roundtrip.mtx");
  write_matrix_market(path, SparseMatrixData::csr(coo).coo());
  const CooMatrix back = read_matrix_market(path);
  std::filesystem::remove(path);
  const SparseMatrixData x_data = SparseMatrixData::csr(coo);
  const SparseMatrix x = x_data.view();
  const SparseMatrixData y_data = SparseMatrixData::csr(back);
  const SparseMatrix y = y_data.view();
  ASSERT_EQ(x.entries, y.entries);
  EXPECT_EQ(0, std::memcmp(x.col_indices, y.col_indices, static_cast<std::size_t>(x.entries) * 4));
  EXPECT_EQ(0, std::memcmp(x.values, y.values, static_cast<std::size_t>(x.entries) * 4));
  // And the kernel gives bitwise the same D for both.
  Matrix b(1, 200, 48, Layout::row_major()), d1(1, 300, 48, Layout::row_major()), d2(1, 300, 48, Layout::row_major());
  std::mt19937 rng(2);
  b.fill_uniform(rng);
  Runtime rt;
  SpmmArgs args;
  args.b = b.view;
  args.a = x;
  args.d = d1.view;
  rt.spmm(args);
  args.a = y;
  args.d = d2.view;
  rt.spmm(args);
  EXPECT_EQ(0, std::memcmp(d1.storage.data(), d2.storage.data(), d1.storage.size() * sizeof(float)));
}

TEST(MatrixMarket, FormsAndSymmetry) {
  std::istringstream pattern("%%MatrixMarket matrix coordinate pattern symmetric\n% c\n3 3 3\n1 1\n2 1\n3 2\n");
  const CooMatrix p = read_matrix_market(pattern);
  EXPECT_EQ(p.row.size(), 5u);  // the two off-diagonal entries mirrored
  std::istringstream integer("%%MatrixMarket matrix coordinate integer general\n2 2 1\n2 2 -4\n");
  EXPECT_EQ(read_matrix_market(integer).value, std::vector<double>{-4});
  std::istringstream skew("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 1.5\n");
  EXPECT_EQ(read_matrix_market(skew).value, (std::vector<double>{1.5, -1.5}));
}

TEST(MatrixMarket, MalformedFilesNameTheLine) {
  const std::string header = "%%MatrixMarket matrix coordinate real general\n";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"", ":0: empty file"},
      {"hello\n", ":1: the first line"},
      {"%%MatrixMarket matrix array real general\n", ":1: only the 'coordinate' format"},
      {"%%MatrixMarket matrix coordinate complex general\n", ":1: the field"},
      {"%%MatrixMarket matrix coordinate real hermitian\n", ":1: the symmetry"},
      {header, "missing the size line"},
      {header + "2 2\n", ":2: missing the entries"},
      {header + "2 2 x\n", ":2: the entries 'x'"},
      {header + "2 2 -1\n", "negative entry count"},
      {header + "2 2 5\n", "cannot fit"},
      {header + "2 2 2\n1 1 1.0\n", "ends after 1 of the 2"},
      {header + "2 2 1\n1 1 1.0\n2 2 1.0\n", ":4: more entries"},
      {header + "2 2 1\n3 1 1.0\n", ":3: entry (3, 1) lies outside"},
      {header + "2 2 1\n0 1 1.0\n", ":3: entry (0, 1)"},
      {header + "2 2 1\n1 1\n", ":3: missing the value"},
      {header + "2 2 1\n1 1 abc\n", ":3: the value 'abc'"},
      {header + "2 2 1\n1 1 1.0 7\n", ":3: unexpected '7'"},
      {header + "99999999999999 2 1\n", "sides must be"},
      {"%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1.0\n", ":3: entry (1, 2) is above"},
      {"%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 1.5\n", "not a 64-bit integer"},
      // Found by fuzz_matrix_market: a value past 64 bits was cast to an integer (undefined behaviour).
      {"%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 53333333333333333333333333333333\n",
       ":3: the value '53333333333333333333333333333333' is not a 64-bit integer"},
      {"%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 inf\n", "not a 64-bit integer"},
      {"%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 nan\n", "not a 64-bit integer"},
      {"%%MatrixMarket matrix coordinate real symmetric\n3 2 1\n2 1 1.0\n", ":2: a symmetric matrix must be square"},
  };
  for (const auto& [text, expected] : cases) {
    std::istringstream in(text);
    try {
      read_matrix_market(in, "m.mtx");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what() << "\nfor: " << text;
    }
  }
  EXPECT_THROW(read_matrix_market(temp_path("missing.mtx")), InvalidArgument);
  // The writer leaves nothing behind where it cannot write.
  EXPECT_THROW(write_matrix_market("/nonexistent-dir/x.mtx", CooMatrix{1, 1, {0}, {0}, {1}}), InvalidArgument);
  EXPECT_THROW(write_matrix_market(temp_path("bad.mtx"), CooMatrix{1, 1, {0}, {3}, {1}}), InvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(temp_path("bad.mtx")));
}

// A mutation fuzzer over valid and malformed files: every input either parses into coordinates inside the matrix
// or throws InvalidArgument naming the line; nothing crashes, hangs or allocates what a header merely claims.
TEST(MatrixMarket, MutatedInputsNeverCrash) {
  const std::vector<std::string> seeds{
      "%%MatrixMarket matrix coordinate real general\n% c\n3 4 3\n1 1 1.5\n2 4 -2\n3 2 1e-3\n",
      "%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n1 1\n3 1\n4 2\n",
      "%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 2\n2 1 5\n3 2 -7\n",
  };
  const std::string alphabet = "0123456789 .-+eE%\n\tx";
  std::mt19937 rng(12345);
  int parsed = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = seeds[static_cast<std::size_t>(i) % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const std::size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + rng() % 3);
          break;
        case 2:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          text.insert(at, std::to_string(rng()));  // large numbers: counts and sides that lie
      }
    }
    std::istringstream in(text);
    try {
      const CooMatrix coo = read_matrix_market(in, "fuzz.mtx");
      for (std::size_t k = 0; k < coo.row.size(); ++k) {
        ASSERT_TRUE(coo.row[k] >= 0 && coo.row[k] < coo.rows && coo.col[k] >= 0 && coo.col[k] < coo.cols) << text;
      }
      ++parsed;
    } catch (const InvalidArgument& e) {
      ASSERT_NE(std::string(e.what()).find("fuzz.mtx:"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(refused, 1000);
}

// Each case breaks one rule; the call must throw InvalidArgument naming the argument, and D must stay untouched.
TEST(SparseBadInput, RefusedWithTheArgumentNamedAndNothingWritten) {
  const CooMatrix coo = random_coo(8, 10, 0.4, 3);
  Runtime rt;
  struct Case {
    const char* expected;
    std::function<void(SpmmArgs&, std::vector<std::int32_t>&, std::vector<std::int32_t>&)> breaks;
  };
  const std::vector<Case> cases{
      {"a.col_indices", [](SpmmArgs&, auto&, auto& idx) { std::swap(idx[0], idx[1]); }},
      {"a.col_indices", [](SpmmArgs&, auto&, auto& idx) { idx[1] = idx[0]; }},
      {"a.col_indices", [](SpmmArgs&, auto&, auto& idx) { idx[2] = 10; }},
      {"a.col_indices", [](SpmmArgs&, auto&, auto& idx) { idx[0] = -1; }},
      {"a.row_offsets", [](SpmmArgs&, auto& off, auto&) { std::swap(off[2], off[3]); }},
      {"a.row_offsets", [](SpmmArgs&, auto& off, auto&) { off[0] = 1; }},
      {"a.entries", [](SpmmArgs& a, auto&, auto&) { a.a.entries += 1; }},
      {"a.row_offsets", [](SpmmArgs& a, auto&, auto&) { a.a.entries -= 1; }},
      {"a.row_offsets", [](SpmmArgs& a, auto&, auto&) { a.a.row_offsets = nullptr; }},
      {"a.values", [](SpmmArgs& a, auto&, auto&) { a.a.values = nullptr; }},
      {"a.values", [](SpmmArgs& a, auto&, auto&) { a.a.value = DType::f16; }},
      {"sparse.index", [](SpmmArgs& a, auto&, auto&) { a.a.index_bits = 16; }},
      {"sparse.block", [](SpmmArgs& a, auto&, auto&) { a.a.block_rows = 0; }},
      {"b:", [](SpmmArgs& a, auto&, auto&) { a.b.shape[0] = 9; }},
      {"b:", [](SpmmArgs& a, auto&, auto&) { a.b = Tensor(); }},
      {"d:", [](SpmmArgs& a, auto&, auto&) { a.d.shape[1] = 5; }},
      // D's 48 floats from the values' start may also cover the indices, wherever the allocator put them (ASan's
      // does): either name is right.
      {"d: overlaps a.", [](SpmmArgs& a, auto&, auto&) { a.d.data = const_cast<void*>(a.a.values); }},
      {"inputs.bias", [](SpmmArgs& a, auto&, auto&) { a.set_epilogue("acc + bias[n]"); }},
      {"c:", [](SpmmArgs& a, auto&, auto&) { a.beta = 1; }},
  };
  for (const Case& c : cases) {
    SparseMatrixData data = SparseMatrixData::csr(coo);
    SparseMatrix view = data.view();
    std::vector<std::int32_t> offsets(static_cast<const std::int32_t*>(view.row_offsets),
                                      static_cast<const std::int32_t*>(view.row_offsets) + 9);
    std::vector<std::int32_t> indices(static_cast<const std::int32_t*>(view.col_indices),
                                      static_cast<const std::int32_t*>(view.col_indices) + view.entries);
    std::vector<float> values(static_cast<std::size_t>(view.entries), 1.0f);
    view.row_offsets = offsets.data();
    view.col_indices = indices.data();
    view.values = values.data();
    Matrix b(1, 10, 6, Layout::row_major()), d(1, 8, 6, Layout::row_major());
    b.fill(1);
    d.fill(42);
    SpmmArgs args;
    args.a = view;
    args.b = b.view;
    args.d = d.view;
    c.breaks(args, offsets, indices);
    const std::vector<float> before = d.storage;
    try {
      rt.spmm(args);
      ADD_FAILURE() << "accepted a case that should name " << c.expected;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(0, std::memcmp(d.storage.data(), before.data(), before.size() * sizeof(float))) << c.expected;
  }
}

TEST(SparseBadInput, Sddmm) {
  const SparseMatrixData pattern = SparseMatrixData::csr(random_coo(8, 10, 0.4, 3));
  const SparseMatrix v = pattern.view();
  Matrix a(1, 8, 16, Layout::row_major()), b(1, 10, 16, Layout::row_major());
  std::vector<float> out(static_cast<std::size_t>(v.entries), 5.0f);
  Runtime rt;
  const auto args = [&] {
    SddmmArgs s;
    s.pattern = v;
    s.a = a.view;
    s.b = b.view;
    s.out = Tensor::vector(out.data(), v.entries);
    return s;
  };
  const std::vector<std::pair<const char*, std::function<void(SddmmArgs&)>>> cases{
      {"a:", [](SddmmArgs& s) { s.a.shape[0] = 7; }},
      {"b:", [](SddmmArgs& s) { s.b.shape[1] = 15; }},
      {"out:", [](SddmmArgs& s) { s.out.shape[0] -= 1; }},
      {"out:", [](SddmmArgs& s) { s.out.strides[0] = 2; }},
      {"out: overlaps", [&](SddmmArgs& s) { s.out.data = a.storage.data(); }},
      {"pattern", [&](SddmmArgs& s) { s.pattern.format = SparseFormat::Bsr, s.pattern.block_rows = 2; }},
      {"epilogue", [](SddmmArgs& s) { s.epilogue = Epilogue::parse("acc"); }},
      {"inputs.bias", [](SddmmArgs& s) { s.set_epilogue("acc + bias[n]"); }},
  };
  for (const auto& [expected, breaks] : cases) {
    SddmmArgs s = args();
    breaks(s);
    try {
      rt.sddmm(s);
      ADD_FAILURE() << "accepted a case that should name " << expected;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(out, std::vector<float>(out.size(), 5.0f)) << expected;
  }
  EXPECT_THROW(Epilogue::parse_sampled("acc + c"), EpilogueError);
  EXPECT_THROW(Epilogue::parse_sampled("acc + r[m,n]"), EpilogueError);
  EXPECT_THROW(Epilogue::parse_sampled("s[n]"), EpilogueError);
  EXPECT_THROW(Epilogue::parse("acc * s"), EpilogueError);
}

TEST(SparseSpecs, JsonRoundTripAndNames) {
  const SparseMatrixData a = SparseMatrixData::bsr(random_coo(32, 32, 0.2, 1), 4, 4, 64, DType::bf16);
  Matrix b(1, 32, 40, Layout::row_major()), d(1, 32, 40, Layout::row_major());
  SpmmArgs args;
  args.a = a.view();
  args.b = b.view;
  args.d = d.view;
  args.set_epilogue("relu(acc + bias[n])");
  std::vector<float> bias(40);
  args.inputs["bias"] = Tensor::vector(bias.data(), 40);
  const SpmmProblem p = describe_spmm(args);
  const CpuSpmmSpec spec{p.signature, CpuSpmmConfig::default_for(p, CpuTarget::host()), CpuTarget::host()};
  const CpuSpmmSpec back = from_json<CpuSpmmSpec>(to_json(spec));
  EXPECT_EQ(back.hash(), spec.hash());
  EXPECT_EQ(back.name(), spec.name());
  EXPECT_EQ(spec.name().rfind("spmm_bsr4x4_i64_bf16_", 0), 0u) << spec.name();
  SddmmArgs s;
  const SparseMatrixData pattern = SparseMatrixData::csr(random_coo(32, 40, 0.2, 1));
  std::vector<float> out(static_cast<std::size_t>(pattern.view().entries));
  s.pattern = pattern.view();
  Matrix sa(1, 32, 8, Layout::row_major()), sb(1, 40, 8, Layout::row_major());
  s.a = sa.view;
  s.b = sb.view;
  s.out = Tensor::vector(out.data(), pattern.view().entries);
  s.set_epilogue("acc * s");
  const SddmmProblem q = describe_sddmm(s);
  const CpuSddmmSpec sspec{q.signature, CpuSddmmConfig::default_for(q, CpuTarget::host()), CpuTarget::host()};
  EXPECT_EQ(from_json<CpuSddmmSpec>(to_json(sspec)).hash(), sspec.hash());
  // The sampled dialect is part of the spec: the same text in GEMM's dialect is a different (invalid) signature.
  nlohmann::json j = to_json(sspec);
  j["signature"]["dense"].erase("epilogue_dialect");
  EXPECT_THROW(from_json<CpuSddmmSpec>(j), Error);
  EXPECT_THROW(validate(p.signature, CpuSpmmConfig{9, 1, 0}, CpuTarget::host()), ConfigError);
  EXPECT_THROW(validate(p.signature, CpuSpmmConfig{8, 4, 0}, CpuTarget::host()), ConfigError);  // 4x4 rows x 8 x 4
  EXPECT_THROW(validate(q.signature, CpuSddmmConfig{9, 1}, CpuTarget::host()), ConfigError);
  const CpuTarget avx2 = CpuTarget::parse("cpu:avx2");
  EXPECT_THROW(validate(q.signature, CpuSddmmConfig{4, 2, 16, 12}, avx2), ConfigError);  // not a multiple of 8
  EXPECT_THROW(validate(q.signature, CpuSddmmConfig{4, 2, 16, 8192}, avx2), ConfigError);
  const CpuSddmmSpec panels{q.signature, CpuSddmmConfig{4, 2, 16, 64}, avx2};
  EXPECT_EQ(from_json<CpuSddmmSpec>(to_json(panels)).hash(), panels.hash());
  EXPECT_NE(panels.hash(), (CpuSddmmSpec{q.signature, CpuSddmmConfig{4, 2, 16, 0}, avx2}.hash()));
  EXPECT_NE(panels.name().find("k64"), std::string::npos) << panels.name();
}

// Every software prefetch of B addresses B's own elements: a bf16 B in 2-byte steps. (Addressed as f32, a bf16 B's
// prefetches landed twice as far along, on rows no entry named: the power-law pattern at N = 64 ran 1.4x slower with
// them than without.)
TEST(SparseKernels, PrefetchesAddressBInItsOwnElements) {
  const SparseMatrixData a = SparseMatrixData::csr(random_coo(32, 32, 0.2, 1));
  Matrix b(1, 32, 64, Layout::row_major()), d(1, 32, 64, Layout::row_major());
  SpmmArgs args;
  args.a = a.view();
  args.b = b.view;
  args.d = d.view;
  const SpmmProblem p = describe_spmm(args);
  for (DType type : {DType::f32, DType::bf16}) {
    SpmmSignature signature = p.signature;
    signature.dense.b.dtype = type;
    const std::string ir = spmm_llvm_ir(CpuSpmmSpec{signature, CpuSpmmConfig{4, 1, 8}, CpuTarget::host()}, 0);
    const std::regex call(R"(call void @llvm\.prefetch\.p0\(ptr (%[-\w.]+))");
    int prefetches = 0;
    for (auto it = std::sregex_iterator(ir.begin(), ir.end(), call); it != std::sregex_iterator(); ++it) {
      ++prefetches;
      const std::string name = (*it)[1];
      const std::regex definition("\n\\s*" + std::regex_replace(name, std::regex(R"([.])"), R"(\.)") +
                                  R"( = getelementptr (inbounds )?(\w+),)");
      std::smatch def;
      ASSERT_TRUE(std::regex_search(ir, def, definition)) << name << " is not a getelementptr";
      EXPECT_EQ(def[2].str(), type == DType::bf16 ? "i16" : "float") << dtype_name(type);
    }
    EXPECT_GT(prefetches, 0) << dtype_name(type);
  }
}

}  // namespace
}  // namespace tessera
