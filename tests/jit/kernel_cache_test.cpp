// The kernel cache: one build per key under concurrent requests, failures not cached, hits are lookups.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "jit/kernel_cache.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {

TEST(KernelCache, ConcurrentRequestsForANewKeyBuildOnce) {
  KernelCache<int> cache;
  std::atomic<int> builds{0};
  std::atomic<bool> go{false};
  std::vector<std::shared_ptr<const int>> results(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      while (!go) std::this_thread::yield();
      results[static_cast<std::size_t>(i)] = cache.get_or_build({1, 2}, [&] {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // keep the others waiting on this build
        return std::make_shared<const int>(42);
      });
    });
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(builds.load(), 1);
  for (const auto& r : results) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r.get(), results[0].get());
  }
  const KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.builds, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 15u);
}

TEST(KernelCache, FailedBuildsReachEveryWaiterAndAreRetried) {
  KernelCache<int> cache;
  std::atomic<int> attempts{0};
  const auto failing = [&]() -> std::shared_ptr<const int> {
    ++attempts;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    throw CompileError("backend exploded");
  };
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      try {
        cache.get_or_build({7, 7}, failing);
      } catch (const CompileError&) {
        ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 4);
  EXPECT_GE(attempts.load(), 1);
  EXPECT_EQ(cache.size(), 0u);
  const auto ok = cache.get_or_build({7, 7}, [] { return std::make_shared<const int>(5); });
  EXPECT_EQ(*ok, 5);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(RuntimeCache, ManyThreadsCompilingTheSameNewKernelCompileOnce) {
  Runtime runtime;
  GemmProblem problem;
  problem.m = problem.n = problem.k = 100;
  problem.signature.epilogue = Epilogue::parse("relu(acc + bias[n])");
  problem.signature.c.layout = Layout::zero();
  problem.signature.inputs = {{"bias", IndexForm::N, {DType::f32, Layout::row_major()}}};
  std::atomic<bool> go{false};
  std::vector<std::string> names(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      while (!go) std::this_thread::yield();
      names[static_cast<std::size_t>(i)] = runtime.compile(problem).name();
    });
  go = true;
  for (auto& t : threads) t.join();
  const CacheStats s = runtime.cache_stats();
  EXPECT_EQ(s.builds, 1u);
  EXPECT_EQ(s.hits + s.misses, 8u);
  for (const auto& n : names) EXPECT_EQ(n, names[0]);
  // Sizes are runtime arguments: another size compiled with the same config reuses the kernel (the cost model may
  // choose another config for it, so the config is given).
  const CpuGemmConfig config = runtime.choose_config(problem);
  problem.m = 1000;
  EXPECT_EQ(runtime.compile(problem, config).name(), names[0]);
  EXPECT_EQ(runtime.cache_stats().builds, 1u);
}

// One Runtime shared by four threads, each running GEMMs of shapes and epilogues the others also run (new kernels
// compiled while others run), every result checked exactly.
TEST(RuntimeCache, OneRuntimeServesManyThreadsAtOnce) {
  RuntimeOptions options;
  options.threads = 2;
  Runtime runtime(options);
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        const std::int64_t m = 8 + 13 * ((t + i) % 4), n = 16 + 7 * (i % 3), k = 5 + 11 * ((t * i) % 5);
        std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)),
            d(static_cast<std::size_t>(m * n), -1.0f), bias(static_cast<std::size_t>(n));
        for (std::size_t x = 0; x < a.size(); ++x) a[x] = static_cast<float>(static_cast<int>((x + t) % 5) - 2);
        for (std::size_t x = 0; x < b.size(); ++x) b[x] = static_cast<float>(static_cast<int>((x * 3 + i) % 7) - 3);
        for (std::size_t x = 0; x < bias.size(); ++x) bias[x] = static_cast<float>(x % 4);
        GemmArgs args;
        args.a = Tensor::matrix(a.data(), m, k);
        args.b = Tensor::matrix(b.data(), k, n);
        args.d = Tensor::matrix(d.data(), m, n);
        const bool with_bias = i % 2 == 1;
        if (with_bias) {
          args.set_epilogue("relu(acc + bias[n])");
          args.inputs["bias"] = Tensor::vector(bias.data(), n);
        }
        args.threads = 1 + (i % 2);
        try {
          runtime.gemm(args);
        } catch (const Error&) {
          ++failed;
          continue;
        }
        for (std::int64_t r = 0; r < m; ++r)
          for (std::int64_t c = 0; c < n; ++c) {
            float want = 0;
            for (std::int64_t p = 0; p < k; ++p)
              want += a[static_cast<std::size_t>(r * k + p)] * b[static_cast<std::size_t>(p * n + c)];
            if (with_bias) want = std::max(0.0f, want + bias[static_cast<std::size_t>(c)]);
            if (d[static_cast<std::size_t>(r * n + c)] != want) ++wrong;
          }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace tessera
