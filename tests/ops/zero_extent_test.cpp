// Zero extents: an empty M, N or batch is a validated no-op (nothing written, as in BLAS), K = 0 writes
// D = epilogue(0, C), and choosing a config for any of them never divides by zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/test_util.hpp"

namespace tessera {
namespace {

using test::Matrix;

struct Extents {
  std::int64_t m, n, k, batch;
};

void PrintTo(const Extents& e, std::ostream* os) { *os << e.m << "x" << e.n << "x" << e.k << "x" << e.batch; }

class ZeroExtent : public ::testing::TestWithParam<std::tuple<Extents, Layout, int>> {};

// D = relu(acc + bias[n]) + beta*c, with a batched D so that batch = 0 is expressible.
TEST_P(ZeroExtent, WritesOnlyWhatTheProductDefines) {
  const auto [e, layout_a, threads] = GetParam();
  std::mt19937 rng(7);
  Matrix a(e.batch, e.m, e.k, layout_a, 3, true), b(e.batch, e.k, e.n, Layout::row_major(), 3, true);
  Matrix c(e.batch, e.m, e.n, Layout::row_major(), 3, true), d(e.batch, e.m, e.n, Layout::row_major(), 3, true);
  a.fill_integers(rng);
  b.fill_integers(rng);
  c.fill_integers(rng);
  d.fill(-7.0f);
  std::vector<float> bias(static_cast<std::size_t>(std::max<std::int64_t>(e.n, 1)));
  for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = static_cast<float>(j % 5) - 2.0f;
  const std::vector<float> d_before = d.storage;

  GemmArgs args;
  args.a = a.view;
  args.b = b.view;
  args.c = c.view;
  args.d = d.view;
  args.beta = 0.5f;
  args.threads = threads;
  args.set_epilogue("relu(acc + bias[n]) + beta*c");
  args.inputs["bias"] = Tensor::vector(bias.data(), e.n);

  static Runtime runtime(RuntimeOptions{"cpu", 2});
  ASSERT_NO_THROW(runtime.gemm(args));
  // The same through a compiled kernel, as an application holding one would call it.
  ASSERT_NO_THROW(runtime.compile(runtime.describe(args)).run(args));

  if (e.m == 0 || e.n == 0 || e.batch == 0) {
    EXPECT_EQ(0, std::memcmp(d.storage.data(), d_before.data(), d.storage.size() * sizeof(float)))
        << "an empty product wrote to D";
    return;
  }
  // K = 0: acc is 0 everywhere.
  for (std::int64_t t = 0; t < e.batch; ++t)
    for (std::int64_t i = 0; i < e.m; ++i)
      for (std::int64_t j = 0; j < e.n; ++j) {
        const double want = std::max(0.0, static_cast<double>(bias[static_cast<std::size_t>(j)])) +
                            0.5 * static_cast<double>(c.at(t, i, j));
        ASSERT_EQ(want, d.at(t, i, j)) << "at " << t << "," << i << "," << j;
      }
}

INSTANTIATE_TEST_SUITE_P(Extents, ZeroExtent,
                         ::testing::Combine(::testing::Values(Extents{0, 5, 5, 1}, Extents{5, 0, 5, 1},
                                                              Extents{5, 5, 0, 1}, Extents{5, 5, 5, 0},
                                                              Extents{0, 0, 0, 1}, Extents{70, 300, 0, 2},
                                                              Extents{0, 4096, 4096, 1}, Extents{300, 0, 300, 3}),
                                            ::testing::Values(Layout::row_major(), Layout::col_major()),
                                            ::testing::Values(1, 2)));

// A kernel specialised for 5x5x5 takes an empty call of its signature: there is nothing to compute.
TEST(ZeroExtentKernel, FixedKernelTakesAnEmptyCall) {
  Runtime runtime;
  Matrix a(1, 5, 5, Layout::row_major()), b(1, 5, 5, Layout::row_major()), d(1, 5, 5, Layout::row_major());
  GemmArgs args;
  args.a = a.view;
  args.b = b.view;
  args.d = d.view;
  const GemmKernel kernel = runtime.compile(runtime.describe(args));
  Matrix a0(1, 0, 5, Layout::row_major()), d0(1, 0, 5, Layout::row_major());
  args.a = a0.view;
  args.d = d0.view;
  EXPECT_NO_THROW(kernel.run(args));
}

// The default config of every CPU target kind, for every zero extent, is one validate() accepts.
TEST(ZeroExtentConfig, DefaultForEveryTargetKind) {
  for (const char* name : {"cpu:avx2", "cpu:avx512"})
    for (int fmas : {1, 2})
      for (const Extents& e :
           {Extents{0, 5, 5, 1}, Extents{5, 0, 5, 1}, Extents{5, 5, 0, 1}, Extents{5, 5, 5, 0}, Extents{0, 0, 0, 0},
            Extents{0, 4096, 4096, 1}, Extents{4096, 0, 4096, 1}, Extents{0, 100, 100, 7}})
        for (const Layout& la : {Layout::row_major(), Layout::col_major()})
          for (const Layout& lb : {Layout::row_major(), Layout::col_major()}) {
            CpuTarget target = CpuTarget::named(name);
            target.vector_fmas_per_cycle = fmas;
            GemmProblem p;
            p.m = e.m, p.n = e.n, p.k = e.k, p.batch = e.batch;
            p.signature.a.layout = la;
            p.signature.b.layout = lb;
            const CpuGemmConfig config = CpuGemmConfig::default_for(p, target);
            EXPECT_NO_THROW(validate(p.signature, config, target)) << name << " " << e.m << "x" << e.n << "x" << e.k;
          }
}

}  // namespace
}  // namespace tessera
