#include "bench/library_benchmark.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>
#include "ops/library/library_builder.hpp"
#include "tessera/tessera.hpp"

namespace tessera::bench {

namespace {

// The library's C ABI (the header `tessera library build` writes for a library named benchlib).
struct CTensor {
  const void* data;
  std::int64_t rs, cs, bs;
};
struct CGemmArgs {
  std::int64_t m, n, k, batch;
  CTensor a, b, c, d;
  const CTensor* inputs;
  float alpha, beta;
  int threads;
};
using CGemmFn = int (*)(const CGemmArgs*);
using CErrorFn = const char* (*)();

}  // namespace

nlohmann::json run_library_benchmark(const std::vector<GemmShape>& shapes, const std::vector<int>& threads, int repeat,
                                     const Sampling& sampling, std::ostream& log) {
  namespace fs = std::filesystem;
  const CpuTarget host = CpuTarget::host();
  nlohmann::json manifest{{"name", "benchlib"}, {"kernels", nlohmann::json::array()}};
  nlohmann::json entry{{"name", "matmul"}, {"op", "gemm"}, {"epilogue", "acc"}, {"targets", {host.str()}}};
  for (const auto& s : shapes) entry["shapes"].push_back(fmt::format("{}x{}x{}x{}", s.m, s.n, s.k, s.batch));
  manifest["kernels"].push_back(entry);
  const fs::path dir = fs::temp_directory_path() / fmt::format("tessera-bench-library-{}", getpid());
  fs::remove_all(dir);
  const LibraryBuildReport built = build_library(parse_library_manifest(manifest.dump()), dir, {});
  log << fmt::format("library: {} variants built in {:.1f} s ({})\n", built.variants, built.seconds, dir.string());
  void* handle = dlopen((dir / "lib" / "libbenchlib.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error(std::string("cannot load the library: ") + dlerror());
  const auto matmul = reinterpret_cast<CGemmFn>(dlsym(handle, "benchlib_matmul"));
  const auto last_error = reinterpret_cast<CErrorFn>(dlsym(handle, "benchlib_last_error"));
  if (!matmul || !last_error) throw Error("the library lacks benchlib_matmul");

  nlohmann::json rows = nlohmann::json::array();
  log << fmt::format("{:<20} {:>7} {:>10} {:>10} {:>9}\n", "shape", "threads", "JIT GF/s", "lib GF/s", "lib/JIT");
  for (const auto& s : shapes)
    for (int t : threads) {
      RuntimeOptions options;
      options.threads = t;
      Runtime runtime(options);
      std::vector<float> a(static_cast<std::size_t>(s.batch * s.m * s.k), 0.5f),
          b(static_cast<std::size_t>(s.batch * s.k * s.n), 0.25f), d(static_cast<std::size_t>(s.batch * s.m * s.n));
      GemmArgs args;
      args.a = Tensor::batched(a.data(), s.batch, s.m, s.k, Layout::row_major(), s.k, s.m * s.k);
      args.b = Tensor::batched(b.data(), s.batch, s.k, s.n, Layout::row_major(), s.n, s.k * s.n);
      args.d = Tensor::batched(d.data(), s.batch, s.m, s.n, Layout::row_major(), s.n, s.m * s.n);
      args.set_epilogue("acc");
      const GemmKernel kernel = runtime.compile(runtime.describe(args));
      const PreparedGemm prepared = kernel.prepare(args);
      const CGemmArgs c{s.m,
                        s.n,
                        s.k,
                        s.batch,
                        {a.data(), s.k, 1, s.m * s.k},
                        {b.data(), s.n, 1, s.k * s.n},
                        {nullptr, 0, 0, 0},
                        {d.data(), s.n, 1, s.m * s.n},
                        nullptr,
                        1.0f,
                        0.0f,
                        t};
      // The same product both ways first: they must agree (inputs vary, so a wrong tile would show).
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
      prepared.run();
      const std::vector<float> jit_d = d;
      std::fill(d.begin(), d.end(), -1.0f);
      if (matmul(&c) != 0) throw Error(std::string("benchlib_matmul: ") + last_error());
      const bool agrees = d == jit_d;  // small integers: exact either way
      const std::function<void()> jit = [&] { prepared.run(); };
      const std::function<void()> library = [&] { matmul(&c); };
      const int calls = sampling.calibrate(jit);
      std::vector<double> jit_s, lib_s;
      for (int r = 0; r < repeat; ++r) {
        jit_s.push_back(sampling.sample(jit, calls, false));
        lib_s.push_back(sampling.sample(library, calls, false));
      }
      const double jit_gf = s.flops() / median(jit_s) / 1e9, lib_gf = s.flops() / median(lib_s) / 1e9;
      const double ratio = 1 / paired_median_ratio(lib_s, jit_s);
      log << fmt::format("{:<20} {:>7} {:>10.1f} {:>10.1f} {:>9.3f}{}\n", s.label(), t, jit_gf, lib_gf, ratio,
                         agrees ? "" : "  DISAGREES");
      rows.push_back({{"shape", s.label()},
                      {"threads", t},
                      {"jit_kernel", kernel.name()},
                      {"jit_gflops", jit_gf},
                      {"library_gflops", lib_gf},
                      {"library_over_jit", ratio},
                      {"agrees", agrees}});
    }
  fs::remove_all(dir);
  return rows;
}

}  // namespace tessera::bench
